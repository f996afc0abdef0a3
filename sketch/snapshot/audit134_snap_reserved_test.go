package snapshot_test

// Audit 134: reserved header bytes and unused flag bits, forged nonzero
// with every checksum repaired.
//
// Contract: docs/snapshots.md "Guarantees" ("Magic, version, kind,
// reserved bytes and the cell count (an error matching
// ErrCorruptSnapshot)"); the tables of "Format, version 1" and "Limiters
// and meters" (every reserved field "0"; limiter flags "bit 0:
// conservative update; others 0" in limit/persist.go), the bucket header
// (internal/bucket/snapshot.go: "96 u64 reserved, 0"), the meter header
// (meter/persist.go: "7 u8 reserved, 0", "24 u32 reserved, 0").
//
// Each forged byte must be refused with ErrCorruptSnapshot or
// ErrSnapshotMismatch, never restored silently.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/lfgrudge/grudge/sketch"
)

// audit134ReservedSites lists, for a snapshot of kind, its reserved
// bytes (and unused flag bits, as the byte and mask).
func audit134ReservedSites(kind string, b []byte) map[string][2]int {
	sites := map[string][2]int{}
	add := func(name string, from, to int) {
		for o := from; o < to; o++ {
			sites[fmt.Sprintf("%s@%d", name, o)] = [2]int{o, 0xff}
		}
	}
	sk := func(off int) {
		add("sketch", off+9, off+12)
		add("sketch", off+20, off+24)
	}
	rot := func(off, end int) {
		add("rotator", off+6, off+8)
		add("rotator", off+12, off+16)
		n := int(binary.LittleEndian.Uint32(b[off+8:]))
		gs := (end - off - 56 - 4) / max(n, 1)
		for i := 0; i < n; i++ {
			sk(off + 56 + i*gs)
		}
	}
	switch kind {
	case "sketch":
		sk(0)
	case "rotator":
		rot(0, len(b))
	case "rate", "novelty":
		add("meter", 7, 8)
		add("meter", 24, 28)
		rot(32, len(b))
	default:
		add("limiter", 44, 48)
		add("limiter", 56, 60)
		sites["limiter-flags@7"] = [2]int{7, 0xfe}
		switch b[6] {
		case 1:
			add("bucket", 64+96, 64+104)
		case 2:
			rot(64, len(b))
		}
	}
	return sites
}

func TestAudit134ReservedBytesRefused(t *testing.T) {
	clock := audit134Clock()
	for _, p := range audit134Pairs(clock) {
		t.Run(p.name, func(t *testing.T) {
			src, _ := p.src(t, 2)
			var buf bytes.Buffer
			if _, err := src.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			orig := buf.Bytes()
			kind := p.name
			if len(kind) > 7 && kind[:7] == "limiter" {
				kind = "limiter"
			}
			_, fix := audit134VersionSites(kind, orig)
			for name, s := range audit134ReservedSites(kind, orig) {
				at, mask := s[0], byte(s[1])
				if orig[at]&mask != 0 {
					t.Fatalf("%s: reserved byte is %#x", name, orig[at])
				}
				for _, v := range []byte{0x01, 0x80} {
					forged := append([]byte(nil), orig...)
					forged[at] |= v & mask
					if forged[at] == orig[at] {
						forged[at] |= 0x02 & mask
					}
					fix(forged)
					d := p.dst(t)
					_, err := d.ReadFrom(bytes.NewReader(forged))
					if !errors.Is(err, sketch.ErrCorruptSnapshot) && !errors.Is(err, sketch.ErrSnapshotMismatch) {
						t.Errorf("%s = %#x: ReadFrom = %v, want a refusal", name, forged[at], err)
					}
				}
			}
		})
	}
}
