package bucket

import (
	"reflect"
	"testing"
)

// TestAudit107FixedChargeOnlyFromEngineCharge (audit 107; fixed at stop
// 61, the text below says what was wrong).
//
// Charge had exported fields N and Limit, and TryCharge/AddCharge checked
// nothing: a hand-made Charge{N: -10} lowered a key's load (q.units of a
// negative product wraps), NaN and +Inf loads wrote Max without the
// float methods' panic, and a Charge made by Engine.Charge(1, 20) and
// edited to N = 30 was still charged as 1 (do trusted the cached ticks).
// Now every field is unexported: outside the package a Charge comes
// only from Engine.Charge, which checks its inputs as TryUpdate does,
// and cannot be edited; N and Limit are read-only accessors.
func TestAudit107FixedChargeOnlyFromEngineCharge(t *testing.T) {
	ty := reflect.TypeOf(Charge{})
	for i := range ty.NumField() {
		if f := ty.Field(i); f.IsExported() {
			t.Errorf("Charge.%s is exported: a caller could make or edit a Charge that Engine.Charge did not check", f.Name)
		}
	}
	e, f := newTest(t, 8, Linear(10, 40), nil), newTest(t, 8, Linear(10, 40), nil)
	ch := e.Charge(1, 20)
	if ch.N() != 1 || ch.Limit() != 20 {
		t.Fatalf("Charge(1, 20) reads (%v, %v)", ch.N(), ch.Limit())
	}
	// The zero Charge is a load of 0 against a limit of 0, as TryUpdate(0, 0).
	for _, key := range []string{"fresh", "held"} {
		if key == "held" {
			e.Update(key, 3)
			f.Update(key, 3)
		}
		if got, want := e.TryCharge(key, Charge{}), f.TryUpdate(key, 0, 0); got != want {
			t.Errorf("%s key: zero Charge admitted %v, TryUpdate(0, 0) %v", key, got, want)
		}
		if e.Query(key) != f.Query(key) {
			t.Errorf("%s key: load %v after the zero Charge, %v after TryUpdate(0, 0)", key, e.Query(key), f.Query(key))
		}
	}
}
