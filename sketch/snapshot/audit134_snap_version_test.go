package snapshot_test

// Audit 134: the format version byte of every header a snapshot nests
// (docs/snapshots.md "Format, version 1": "format version | 1; any other
// is refused (corrupt)"; the limiter, meter, rotator, generation and
// bucket headers each carry one), forged with every checksum repaired so
// that only the version can refuse it. Each forgery (0, 2, 255) must be
// an error matching ErrCorruptSnapshot, and the destination unchanged
// (Guarantees: "a refused header leaves the sketch unchanged", "a failed
// restore never changes" a rotator; limiter ReadFrom "unchanged, when the
// header is refused") or empty. The same repair with the version left at
// 1 must restore, so the repair itself is right.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/lfgrudge/grudge/sketch"
)

var audit134Crc = crc32.MakeTable(crc32.Castagnoli)

func audit134FixTail(b []byte) {
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], audit134Crc))
}

// audit134VersionSites returns, for a snapshot of the named kind, the
// offsets of its version bytes (with a name) and a function repairing
// every checksum after a change.
func audit134VersionSites(kind string, b []byte) (map[string]int, func([]byte)) {
	sites := map[string]int{}
	var fixes []func([]byte)
	rot := func(off int, end int) {
		sites[fmt.Sprintf("rotator@%d", off)] = off + 4
		n := int(binary.LittleEndian.Uint32(b[off+8:]))
		if n < 1 || n > 64 || (end-off-56-4)%n != 0 {
			n = 0 // a forged count (fuzzing): repair the outer checksum only
		}
		gs := 0
		if n > 0 {
			gs = (end - off - 56 - 4) / n
		}
		for i := 0; i < n; i++ {
			g := off + 56 + i*gs
			sites[fmt.Sprintf("generation%d@%d", i, g)] = g + 4
			fixes = append(fixes, func(x []byte) { audit134FixTail(x[g : g+gs]) })
		}
		fixes = append(fixes, func(x []byte) { audit134FixTail(x[off:end]) })
	}
	switch kind {
	case "sketch":
		sites["sketch"] = 4
		fixes = append(fixes, audit134FixTail)
	case "rotator":
		rot(0, len(b))
	case "rate", "novelty":
		sites["meter"] = 4
		fixes = append(fixes, func(x []byte) {
			binary.LittleEndian.PutUint32(x[28:], crc32.Checksum(x[:28], audit134Crc))
		})
		rot(32, len(b))
	default: // limiter
		sites["limiter"] = 4
		fixes = append(fixes, func(x []byte) {
			binary.LittleEndian.PutUint32(x[60:], crc32.Checksum(x[:60], audit134Crc))
		})
		switch b[6] {
		case 1:
			sites["bucket"] = 64 + 4
			fixes = append(fixes, func(x []byte) { audit134FixTail(x[64:]) })
		case 2:
			rot(64, len(b))
		}
	}
	return sites, func(x []byte) {
		for _, f := range fixes {
			f(x)
		}
	}
}

func TestAudit134NestedVersionBytesRefused(t *testing.T) {
	clock := audit134Clock()
	for _, p := range audit134Pairs(clock) {
		t.Run(p.name, func(t *testing.T) {
			src, _ := p.src(t, 1)
			var buf bytes.Buffer
			if _, err := src.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			orig := buf.Bytes()
			s1, _ := p.src(t, 2)
			var buf1 bytes.Buffer
			if _, err := s1.WriteTo(&buf1); err != nil {
				t.Fatal(err)
			}
			empty := p.probe(p.dst(t), "a")
			// restored builds a destination holding snapshot 2.
			restored := func() audit134Dst {
				d := p.dst(t)
				if _, err := d.ReadFrom(bytes.NewReader(buf1.Bytes())); err != nil {
					t.Fatal(err)
				}
				return d
			}
			kind := p.name
			if len(kind) > 7 && kind[:7] == "limiter" {
				kind = "limiter"
			}
			sites, fix := audit134VersionSites(kind, orig)
			if len(sites) < 2 && kind != "sketch" {
				t.Fatalf("found only %v", sites)
			}
			// Control: repaired, unchanged version: restores.
			{
				d := p.dst(t)
				ctl := append([]byte(nil), orig...)
				fix(ctl)
				if !bytes.Equal(ctl, orig) {
					t.Fatalf("repair changed an intact snapshot")
				}
				if _, err := d.ReadFrom(bytes.NewReader(ctl)); err != nil {
					t.Fatalf("control: %v", err)
				}
			}
			for name, at := range sites {
				if orig[at] != 1 {
					t.Fatalf("%s: version byte at %d is %d, want 1", name, at, orig[at])
				}
				for _, v := range []byte{0, 2, 255} {
					forged := append([]byte(nil), orig...)
					forged[at] = v
					fix(forged)
					d := restored()
					before := p.probe(d, "a")
					if before == empty {
						t.Fatalf("snapshot 2 restores as empty (%v)", before)
					}
					_, err := d.ReadFrom(bytes.NewReader(forged))
					if !errors.Is(err, sketch.ErrCorruptSnapshot) {
						t.Errorf("%s version %d: ReadFrom = %v, want ErrCorruptSnapshot", name, v, err)
					}
					// Unchanged; a sketch or limiter may be left empty
					// by an error past its own header.
					mayEmpty := kind == "sketch" || kind == "limiter"
					if got := p.probe(d, "a"); got != before && !(mayEmpty && got == empty) {
						t.Errorf("%s version %d: destination changed by a refused restore: %v, was %v", name, v, got, before)
					}
					if u, ok := restored().(interface{ UnmarshalBinary([]byte) error }); ok {
						if err := u.UnmarshalBinary(forged); !errors.Is(err, sketch.ErrCorruptSnapshot) {
							t.Errorf("%s version %d: UnmarshalBinary = %v, want ErrCorruptSnapshot", name, v, err)
						}
					}
				}
			}
		})
	}
}
