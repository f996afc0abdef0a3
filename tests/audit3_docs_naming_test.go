package tests

// Audit 3 (docs): package sketch's "Naming" rule ("One rule across
// sketch, rotator, the reference, limit, meter, httplimit and redis"),
// checked by reflection on the core module's types:
//
//   - Keys: the grudge-named methods (Update, Query, UpdateAndQuery,
//     TryUpdate, QueryDetailed) take key []byte, with a String twin; every
//     other method takes key string.
//   - Time: one full form taking t time.Time first, named with
//     x/time/rate's N where it has one (AllowN, ReserveN, DecideN, and
//     limit's PeekN), with At otherwise; the short form exists beside it.

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lfgrudge/grudge/limit"
	"github.com/lfgrudge/grudge/meter"
	"github.com/lfgrudge/grudge/rotator"
	"github.com/lfgrudge/grudge/sketch"
	"github.com/lfgrudge/grudge/sketch/reference"
	"github.com/lfgrudge/grudge/sketch/sketchtest"
)

func TestAudit3DocsNamingRule(t *testing.T) {
	ref, err := reference.New(sketch.Config{Hi: 1})
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]reflect.Type{
		"sketch.Sketch":     reflect.TypeFor[*sketch.Sketch](),
		"rotator.Rotator":   reflect.TypeFor[*rotator.Rotator](),
		"reference.New":     reflect.TypeOf(ref),
		"limit.Limiter":     reflect.TypeFor[*limit.Limiter](),
		"limit.Tier":        reflect.TypeFor[*limit.Tier](),
		"limit.Multi":       reflect.TypeFor[*limit.Multi](),
		"meter.Rate":        reflect.TypeFor[*meter.Rate](),
		"meter.Novelty":     reflect.TypeFor[*meter.Novelty](),
		"meter.Inflight":    reflect.TypeFor[*meter.Inflight](),
		"limit.Reservation": reflect.TypeFor[*limit.Reservation](),
	}
	bytesT := reflect.TypeFor[[]byte]()
	timeT := reflect.TypeFor[time.Time]()
	stringT := reflect.TypeFor[string]()
	grudgeNamed := map[string]bool{"Update": true, "Query": true, "UpdateAndQuery": true, "TryUpdate": true, "QueryDetailed": true}
	nForms := map[string]bool{"AllowN": true, "ReserveN": true, "DecideN": true, "PeekN": true}
	// The reference's values are documented through interfaces
	// (sketch.Scorer, reference.Rotator, sketchtest.AtScorer): only those
	// methods are its surface.
	documented := map[string]bool{}
	for _, it := range []reflect.Type{reflect.TypeFor[sketch.Scorer](), reflect.TypeFor[reference.Rotator](), reflect.TypeFor[sketchtest.AtScorer]()} {
		for i := range it.NumMethod() {
			documented[it.Method(i).Name] = true
		}
	}
	// In(0) is the receiver.
	for tn, typ := range types {
		for i := range typ.NumMethod() {
			m := typ.Method(i)
			if strings.HasPrefix(tn, "reference.") && !documented[m.Name] {
				continue
			}
			if m.Name == "UnmarshalBinary" { // encoding.BinaryUnmarshaler: data, not a key
				continue
			}
			in := func(j int) reflect.Type {
				if j+1 < m.Type.NumIn() {
					return m.Type.In(j + 1)
				}
				return nil
			}
			for j := 1; j < m.Type.NumIn(); j++ {
				if m.Type.In(j) == bytesT && !grudgeNamed[m.Name] {
					t.Errorf("%s.%s takes []byte: only the grudge-named methods do", tn, m.Name)
				}
			}
			if grudgeNamed[m.Name] {
				if in(0) != bytesT {
					t.Errorf("%s.%s: first parameter %v, want key []byte", tn, m.Name, in(0))
				}
				if m.Name == "QueryDetailed" {
					continue
				}
				// "Each operation has a short form that reads the clock
				// and one full form that takes t time.Time first".
				if _, ok := typ.MethodByName(m.Name + "At"); !ok {
					t.Errorf("%s.%s has no full form %sAt(t time.Time, key string, ...)", tn, m.Name, m.Name)
				}
				tw, ok := typ.MethodByName(m.Name + "String")
				if !ok {
					t.Errorf("%s.%s has no String twin", tn, m.Name)
					continue
				}
				if tw.Type.NumIn() != m.Type.NumIn() || tw.Type.In(1) != stringT {
					t.Errorf("%s.%sString: signature %v, want %v with key string", tn, m.Name, tw.Type, m.Type)
				}
			}
			if strings.HasSuffix(m.Name, "String") && strings.HasSuffix(strings.TrimSuffix(m.Name, "String"), "At") ||
				strings.HasSuffix(m.Name, "At") && strings.HasSuffix(strings.TrimSuffix(m.Name, "At"), "String") {
				t.Errorf("%s.%s: a second full form (one full form per operation, string keys)", tn, m.Name)
			}
			if strings.HasSuffix(m.Name, "At") || nForms[m.Name] {
				if in(0) != timeT || in(1) != stringT {
					t.Errorf("%s.%s%v: want t time.Time first, then key string", tn, m.Name, m.Type)
				}
				short := strings.TrimSuffix(m.Name, "At")
				if nForms[m.Name] {
					short = strings.TrimSuffix(m.Name, "N")
				}
				if _, ok := typ.MethodByName(short); !ok {
					t.Errorf("%s.%s has no short form %s", tn, m.Name, short)
				}
			}
		}
	}
}

// sketchtest.AtScorer's doc: "AtScorer is the time-first At forms that
// sketch.Sketch, the reference and the rotators have"; package sketch's
// "Naming" (which names the reference): "Each operation has a short form
// that reads the clock and one full form that takes t time.Time first".
// rotator.Rotator and reference.New's sketch have them; the reference
// rotator (reference.NewRotator) has none.
func TestAudit3DocsReferenceRotatorAtForms(t *testing.T) {
	for name, build := range map[string]func() (sketch.Scorer, func(), error){
		"rotator.New": func() (sketch.Scorer, func(), error) {
			r, err := rotator.New(rotator.Config{Sketch: sketch.Config{Hi: 1}, Period: time.Hour})
			return r, func() {}, err
		},
		"reference.New": func() (sketch.Scorer, func(), error) {
			s, err := reference.New(sketch.Config{Hi: 1})
			return s, func() {}, err
		},
		"reference.NewRotator": func() (sketch.Scorer, func(), error) {
			r, err := reference.NewRotator(reference.RotatorConfig{Sketch: sketch.Config{Hi: 1}, Period: time.Hour})
			if err != nil {
				return nil, nil, err
			}
			return r, r.Close, nil
		},
	} {
		s, done, err := build()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, ok := s.(sketchtest.AtScorer); !ok {
			t.Errorf("%s's value (%T) is not a sketchtest.AtScorer: it has no UpdateAt, QueryAt, UpdateAndQueryAt, TryUpdateAt", name, s)
		}
		done()
	}
}
