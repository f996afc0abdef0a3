package redis

import (
	"encoding/binary"
	"math"
	"strconv"
	"testing"

	"github.com/lfgrudge/grudge/internal/core"
)

// FuzzDecodeReply feeds arbitrary replies (as a foreign or broken server
// could send) to the Go-side decoder: it never panics, accepts exactly the
// well-formed replies (25 bytes: allowed 0 or 1, a finite estimate, retry
// and reset whole numbers in [-1, 2^53)), and returns their fields bit for
// bit.
func FuzzDecodeReply(f *testing.F) {
	rep := func(ok byte, e, retry, reset float64) []byte {
		b := []byte{ok}
		for _, v := range []float64{e, retry, reset} {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
		return b
	}
	f.Add(rep(1, 3.5, -1, -1))
	f.Add(rep(0, 10, 1234, 5000))
	f.Add(rep(1, math.NaN(), 0, 0))
	f.Add(rep(2, 1.5, -2, 0.5))
	f.Add(rep(0, 1, 1<<53, 0))
	f.Add([]byte("1.5"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeReply("T", string(b))
		good := len(b) == replyBytes
		var e, retry, reset float64
		if good {
			d := func(i int) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b[1+8*i:])) }
			e, retry, reset = d(0), d(1), d(2)
			whole := func(v float64) bool { return v >= -1 && v < 1<<53 && v == math.Trunc(v) }
			good = b[0] <= 1 && !math.IsNaN(e) && !math.IsInf(e, 0) && whole(retry) && whole(reset)
		}
		if good != (err == nil) {
			t.Fatalf("decodeReply(%x) = %+v, %v; want error: %v", b, r, err, !good)
		}
		if err == nil && (r.ok != (b[0] == 1) || math.Float64bits(r.estimate) != math.Float64bits(e) ||
			r.retryMs != int64(retry) || r.resetMs != int64(reset)) {
			t.Fatalf("decodeReply(%x) = %+v", b, r)
		}
	})
}

// FuzzScriptArgs decodes the script's ARGV as sketch.lua does (struct
// '<I4I4I4I4ddddBB' and '<ddd', decimal byte ranges) for arbitrary shapes,
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
		if len(args) != 4+2*int(L) {
			t.Fatalf("%d args; want %d", len(args), 4+2*L)
		}
		c := []byte(args[1])
		if len(c) != 50 {
			t.Fatalf("cfg is %d bytes; want 50", len(c))
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
		if c[48] != kindCodes[n.kind] || c[49] != aggCodes[n.Aggregator] || c[48] > 2 || c[49] > 2 {
			t.Fatalf("kind, agg codes = %d, %d", c[48], c[49])
		}
		nums := []byte(args[2])
		if len(nums) != 24 || math.Float64bits(d(nums, 0)) != math.Float64bits(delta) ||
			math.Float64bits(d(nums, 1)) != math.Float64bits(limit) || d(nums, 2) != float64(rebaseAt) {
			t.Fatalf("nums = %x", nums)
		}
		if args[3] != "" {
			t.Fatalf("now = %q without a Clock", args[3])
		}
		size := uint64(headerBytes) + uint64(L)*uint64(M)*8
		for l := range L {
			pos, err1 := strconv.ParseUint(args[4+2*l], 10, 64)
			end, err2 := strconv.ParseUint(args[5+2*l], 10, 64)
			if err1 != nil || err2 != nil || end != pos+7 || end >= size {
				t.Fatalf("level %d: range %q..%q in a string of %d bytes", l, args[4+2*l], args[5+2*l], size)
			}
			want := uint64(headerBytes) + 8*(uint64(l)*uint64(M)+uint64(core.Index(h, l, M)))
			if pos != want {
				t.Fatalf("level %d: pos %d; want %d", l, pos, want)
			}
		}
	})
}
