package redis

import (
	"encoding/binary"
	"math"
	"strconv"
	"testing"

	"github.com/lfgrudge/grudge/internal/core"
)

// FuzzDecodeReply feeds arbitrary script-reply fields (as a foreign or
// broken server could send) to the Go-side decoder: it never panics,
// accepts exactly the well-formed replies, and returns their estimate
// bit for bit.
func FuzzDecodeReply(f *testing.F) {
	le := func(v float64) []byte { return binary.LittleEndian.AppendUint64(nil, math.Float64bits(v)) }
	f.Add(int64(1), le(3.5), int64(-1), int64(-1))
	f.Add(int64(0), le(10), int64(1234), int64(5000))
	f.Add(int64(1), le(math.NaN()), int64(0), int64(0))
	f.Add(int64(2), []byte("1.5"), int64(-2), int64(0))
	f.Fuzz(func(t *testing.T, ok int64, eb []byte, retry, reset int64) {
		r, err := decodeReply("T", ok, string(eb), retry, reset)
		good := (ok == 0 || ok == 1) && len(eb) == 8 && retry >= -1 && reset >= -1
		var e float64
		if len(eb) == 8 {
			e = math.Float64frombits(binary.LittleEndian.Uint64(eb))
			good = good && !math.IsNaN(e) && !math.IsInf(e, 0)
		}
		if good != (err == nil) {
			t.Fatalf("decodeReply(%d, %x, %d, %d) = %+v, %v; want error: %v", ok, eb, retry, reset, r, err, !good)
		}
		if err == nil && (r.ok != (ok == 1) || math.Float64bits(r.estimate) != math.Float64bits(e) || r.retryMs != retry || r.resetMs != reset) {
			t.Fatalf("decodeReply(%d, %x, %d, %d) = %+v", ok, eb, retry, reset, r)
		}
	})
}

// FuzzScriptArgs decodes the script's ARGV as sketch.lua does (struct
// '<I4I4I4I4dddd' and '<ddd', decimal byte ranges) for arbitrary shapes,
// hashes and numbers: the static config and the numbers come back bit for
// bit, and each level's range is that level's cell, sketch.Index's, 8
// bytes inside the generation string.
func FuzzScriptArgs(f *testing.F) {
	f.Add(uint64(0), uint8(3), uint32(99_999), 1.0, 1e9, int64(1<<31))
	f.Add(uint64(1<<63+12345), uint8(7), uint32(0), -0.5, 0.0, int64(1000))
	f.Fuzz(func(t *testing.T, h uint64, lv uint8, cells uint32, delta, limit float64, rebaseAt int64) {
		cfg := Config{Name: "f", Levels: uint32(lv%maxLevels) + 1, CellsPerLevel: cells%1_000_000 + 1, Hi: 1e9}
		n, err := cfg.normalize()
		if err != nil {
			t.Fatal(err)
		}
		args := scriptArgs(n, "T", h, delta, limit, rebaseAt)
		L, M := n.Levels, n.CellsPerLevel
		if len(args) != 8+2*int(L) {
			t.Fatalf("%d args; want %d", len(args), 8+2*L)
		}
		c := []byte(args[1])
		if len(c) != 48 {
			t.Fatalf("cfg is %d bytes; want 48", len(c))
		}
		u := func(i int) uint32 { return binary.LittleEndian.Uint32(c[4*i:]) }
		d := func(b []byte, i int) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])) }
		if u(0) != L || u(1) != M || u(2) != n.Generations || u(3) != n.fp {
			t.Fatalf("cfg L M G fp = %d %d %d %d", u(0), u(1), u(2), u(3))
		}
		f := c[16:]
		if d(f, 0) != float64(n.Period.Milliseconds()) || d(f, 1) != n.param || d(f, 2) != n.lo || d(f, 3) != n.hi {
			t.Fatalf("cfg P param lo hi = %v %v %v %v", d(f, 0), d(f, 1), d(f, 2), d(f, 3))
		}
		if args[2] != n.kind.String() || args[3] != "max" && args[3] != "min" && args[3] != "mean" {
			t.Fatalf("kind, agg = %q, %q", args[2], args[3])
		}
		if size := int64(headerBytes) + int64(L)*int64(M)*8; args[4] != strconv.FormatInt(-size, 10) || args[5] != strconv.FormatInt(-size+39, 10) {
			t.Fatalf("hs, he = %q, %q", args[4], args[5])
		}
		nums := []byte(args[6])
		if len(nums) != 24 || math.Float64bits(d(nums, 0)) != math.Float64bits(delta) ||
			math.Float64bits(d(nums, 1)) != math.Float64bits(limit) || d(nums, 2) != float64(rebaseAt) {
			t.Fatalf("nums = %x", nums)
		}
		if args[7] != "" {
			t.Fatalf("now = %q without a Clock", args[7])
		}
		size := uint64(headerBytes) + uint64(L)*uint64(M)*8
		for l := range L {
			pos, err1 := strconv.ParseUint(args[8+2*l], 10, 64)
			end, err2 := strconv.ParseUint(args[9+2*l], 10, 64)
			if err1 != nil || err2 != nil || end != pos+7 || end >= size {
				t.Fatalf("level %d: range %q..%q in a string of %d bytes", l, args[8+2*l], args[9+2*l], size)
			}
			want := uint64(headerBytes) + 8*(uint64(l)*uint64(M)+uint64(core.Index(h, l, M)))
			if pos != want {
				t.Fatalf("level %d: pos %d; want %d", l, pos, want)
			}
		}
	})
}
