package matrix

import (
	"fmt"
	"image"
	"image/color"
	"image/color/palette"
	stddraw "image/draw"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// okabeIto is the Okabe–Ito colour-blind-safe palette (Okabe & Ito,
// "Color Universal Design", 2002), without its yellow, which is too pale
// on white for thin lines.
var okabeIto = []color.RGBA{
	{R: 0x00, G: 0x72, B: 0xb2, A: 0xff}, // blue
	{R: 0xd5, G: 0x5e, B: 0x00, A: 0xff}, // vermillion
	{R: 0x00, G: 0x9e, B: 0x73, A: 0xff}, // bluish green
	{R: 0xe6, G: 0x9f, B: 0x00, A: 0xff}, // orange
	{R: 0xcc, G: 0x79, B: 0xa7, A: 0xff}, // reddish purple
	{R: 0x56, G: 0xb4, B: 0xe9, A: 0xff}, // sky blue
	{R: 0x00, G: 0x00, B: 0x00, A: 0xff}, // black
}

// series is how one line is drawn: colour, marker and dashes, so that
// lines stay apart in grey print and for colour-blind readers too.
type series struct {
	color  color.RGBA
	glyph  draw.GlyphDrawer
	dashes []vg.Length
}

// implStyle gives every implementation the same style in every plot.
// atomicadd is the reference line: black, dashed, no marker.
var implStyle = map[string]series{
	ImplLockfree:   {okabeIto[0], draw.CircleGlyph{}, nil},
	ImplReference:  {okabeIto[1], draw.SquareGlyph{}, nil},
	ImplRotator:    {okabeIto[2], draw.TriangleGlyph{}, []vg.Length{vg.Points(5), vg.Points(2)}},
	ImplRefRotator: {okabeIto[3], draw.PyramidGlyph{}, []vg.Length{vg.Points(5), vg.Points(2)}},
	ImplAtomicAdd:  {okabeIto[6], nil, []vg.Length{vg.Points(4), vg.Points(3)}},
	ImplRateMap:    {okabeIto[4], draw.CrossGlyph{}, []vg.Length{vg.Points(1.5), vg.Points(1.5)}},
}

// workStyle gives every workload the same style in the ratio plots.
var workStyle = map[string]series{
	WorkUpdate:          {okabeIto[0], draw.CircleGlyph{}, nil},
	WorkUpdateSaturated: {okabeIto[6], draw.BoxGlyph{}, []vg.Length{vg.Points(4), vg.Points(3)}},
	WorkQuery:           {okabeIto[1], draw.SquareGlyph{}, nil},
	WorkUpdateAndQuery:  {okabeIto[2], draw.TriangleGlyph{}, []vg.Length{vg.Points(5), vg.Points(2)}},
	WorkTryUpdateAdmit:  {okabeIto[3], draw.PyramidGlyph{}, []vg.Length{vg.Points(5), vg.Points(2)}},
	WorkTryUpdateDenied: {okabeIto[4], draw.CrossGlyph{}, nil},
	WorkMix90:           {okabeIto[5], draw.PlusGlyph{}, []vg.Length{vg.Points(1.5), vg.Points(1.5)}},
}

// Plot sizes: one tile per workload x dist (ratio plots: per ratio x
// dist), a header for the title, and a column on the right for the
// legend, outside every tile's data.
const (
	tileW   = 7 * vg.Centimeter
	tileH   = 5.5 * vg.Centimeter
	header  = 1.3 * vg.Centimeter
	legendW = 5 * vg.Centimeter
	dpi     = 100
)

// WritePlots writes, per clock mode, into dir:
//
//   - throughput-<clock>.png: Mops/s vs threads, one tile per workload x
//     dist, one line per implementation through the medians, error bars
//     from the slowest to the fastest repeat; atomicadd is a dashed
//     reference line that does not set the y-range (a tile notes it when
//     it is off scale);
//   - ratio-<clock>.png: lockfree/reference (and rotator/refrotator) vs
//     threads, one tile per dist, one line per workload through the ratio
//     of the medians, error bars from min/max to max/min, log2 y-axis,
//     1.0x marked;
//   - latency-<clock>.png: medians of p50, p99, p99.9 at the largest P,
//     error bars over the repeats, log scale;
//
// each with its legend in a column of its own, and returns the paths
// written.
func WritePlots(rep *Report, dir string) ([]string, error) {
	rs := rep.Results
	if len(rs) == 0 {
		return nil, nil
	}
	works := present(rs, AllWorkloads, func(r *Result) string { return r.Workload })
	dists := present(rs, AllDists, func(r *Result) string { return r.Dist })
	clocks := present(rs, AllClocks, func(r *Result) string { return r.Clock })
	impls := present(rs, AllImpls, func(r *Result) string { return r.Impl })
	procs := sortedProcs(rs)
	ix := newIndex(rs)
	m := &rep.Meta
	sub := fmt.Sprintf("%s, %d CPUs, %s/%s, %s, commit %s; pinning %s; %s", m.CPUModel, m.Cores, m.GOOS, m.GOARCH, m.GoVersion, m.Commit, pinWord(m.Pinning), repeatWords(rep))
	var paths []string
	write := func(name string, g grid) error {
		path := filepath.Join(dir, name)
		if err := g.render(path); err != nil {
			return err
		}
		paths = append(paths, path)
		return nil
	}
	for _, clk := range clocks {
		ci := slices.DeleteFunc(slices.Clone(impls), func(im string) bool { return !runsUnder(im, clk) })
		pmax := procs[len(procs)-1]
		thr := grid{
			title: fmt.Sprintf("Throughput vs threads, clock=%s (%s)", clk, clockWords(clk)), sub: sub,
			rows: works, cols: dists,
			legend: implLegend(ci, "points: median of repeats", "bars: slowest–fastest repeat"),
			tile: func(wk, d string) (*plot.Plot, error) {
				return throughputTile(ix, clk, wk, d, ci, procs)
			},
		}
		lat := grid{
			title: fmt.Sprintf("Latency percentiles at P=%d, clock=%s (1 op in %d timed)", pmax, clk, m.SampleEvery), sub: sub,
			rows: works, cols: dists,
			legend: implLegend(ci, "points: median of repeats", "bars: min–max of repeats"),
			tile: func(wk, d string) (*plot.Plot, error) {
				return latencyTile(ix, clk, wk, d, ci, pmax)
			},
		}
		if err := write("throughput-"+clk+".png", thr); err != nil {
			return paths, err
		}
		if pairs := ratioPairs(impls); len(pairs) > 0 {
			var rows []string
			for _, pr := range pairs {
				rows = append(rows, pr[0]+"/"+pr[1])
			}
			rat := grid{
				title: fmt.Sprintf("Speed-up over the mutex reference vs threads, clock=%s (%s)", clk, clockWords(clk)), sub: sub,
				rows: rows, cols: dists,
				legend: workLegend(works),
				tile: func(pair, d string) (*plot.Plot, error) {
					i := slices.Index(rows, pair)
					return ratioTile(ix, clk, pairs[i][0], pairs[i][1], d, works, procs)
				},
			}
			if err := write("ratio-"+clk+".png", rat); err != nil {
				return paths, err
			}
		}
		if err := write("latency-"+clk+".png", lat); err != nil {
			return paths, err
		}
	}
	return paths, nil
}

// ratioPairs lists the (implementation, base) pairs present in impls
// that the ratio plots show.
func ratioPairs(impls []string) [][2]string {
	var out [][2]string
	for _, pr := range [][2]string{{ImplLockfree, ImplReference}, {ImplRotator, ImplRefRotator}} {
		if slices.Contains(impls, pr[0]) && slices.Contains(impls, pr[1]) {
			out = append(out, pr)
		}
	}
	return out
}

// repeatWords says how many repeats the plotted cells are of: Count, or,
// for a run stopped before its last round, the repeats its cells got (as
// WriteMarkdown says).
func repeatWords(rep *Report) string {
	m := &rep.Meta
	if lo, hi := repeatsGot(rep.Results); m.Stopped != "" && lo < max(m.Count, 1) {
		return fmt.Sprintf("%s of %d interleaved repeats of %s per cell (stopped)", repeatRange(lo, hi), m.Count, fmtDurMs(m.DurationMs))
	}
	if m.Count > 1 {
		return fmt.Sprintf("%d interleaved repeats of %s per cell", m.Count, fmtDurMs(m.DurationMs))
	}
	return fmt.Sprintf("one %s sample per cell", fmtDurMs(m.DurationMs))
}

// jitter spreads the points of n series at one x a little apart (x is on
// a log scale), so that their error bars do not hide each other.
func jitter(x float64, i, n int) float64 {
	return x * math.Pow(1.035, float64(i)-float64(n-1)/2)
}

// errPoints are points with asymmetric vertical error bars.
type errPoints struct {
	plotter.XYs
	plotter.YErrors
}

// addSeries draws xy (with error bars when errs is not nil) in style s.
func addSeries(p *plot.Plot, s series, xy plotter.XYs, errs plotter.YErrors) error {
	if len(xy) == 0 {
		return nil
	}
	l, err := plotter.NewLine(xy)
	if err != nil {
		return err
	}
	l.Color, l.Width, l.Dashes = s.color, vg.Points(1.3), s.dashes
	p.Add(l)
	if errs != nil {
		eb, err := plotter.NewYErrorBars(errPoints{xy, errs})
		if err != nil {
			return err
		}
		eb.Color, eb.Width, eb.CapWidth = s.color, vg.Points(1), vg.Points(4)
		p.Add(eb)
	}
	if s.glyph != nil {
		sc, err := plotter.NewScatter(xy)
		if err != nil {
			return err
		}
		sc.Color, sc.Shape, sc.Radius = s.color, s.glyph, vg.Points(2.6)
		p.Add(sc)
	}
	return nil
}

// throughputTile plots Mops/s vs P of every implementation in impls on
// one workload and dist. The y-range comes from the implementations
// other than atomicadd (it is far above them and would squash the
// comparison that matters); atomicadd is drawn clipped, and noted when
// it leaves the range.
func throughputTile(ix index, clk, wk, d string, impls []string, procs []int) (*plot.Plot, error) {
	p := newTile(wk+" · "+d, "threads (P)", "Mops/s")
	setProcsAxis(p, procs)
	ymax, aaMax := 0.0, 0.0
	for _, im := range impls {
		for _, pr := range procs {
			if r := ix.get(clk, im, wk, d, pr); r != nil {
				hi := max(r.Mops, r.MopsMax)
				if im == ImplAtomicAdd {
					aaMax = max(aaMax, hi)
				} else {
					ymax = max(ymax, hi)
				}
			}
		}
	}
	if ymax == 0 {
		ymax = aaMax // atomicadd alone: it sets the scale after all
	}
	for i, im := range impls {
		var xy plotter.XYs
		var errs plotter.YErrors
		for _, pr := range procs {
			r := ix.get(clk, im, wk, d, pr)
			if r == nil {
				continue
			}
			x := float64(pr)
			if im != ImplAtomicAdd {
				x = jitter(x, i, len(impls))
			}
			xy = append(xy, plotter.XY{X: x, Y: r.Mops})
			lo, hi := bounds(r)
			errs = append(errs, struct{ Low, High float64 }{r.Mops - lo, hi - r.Mops})
		}
		if im == ImplAtomicAdd {
			errs = nil
		}
		if err := addSeries(p, implStyle[im], xy, errs); err != nil {
			return nil, err
		}
	}
	p.Y.Min, p.Y.Max = 0, ymax*1.12
	if p.Y.Max <= 0 {
		p.Y.Max = 1
	}
	p.Y.Tick.Marker = plainTicks{}
	if aaMax > p.Y.Max {
		note(p, fmt.Sprintf("atomicadd up to %s Mops/s (off scale)", fmtMops(aaMax)))
	}
	return p, nil
}

// ratioTile plots a/b (medians) vs P for every workload on one dist.
func ratioTile(ix index, clk, a, b, d string, works []string, procs []int) (*plot.Plot, error) {
	p := newTile(a+"/"+b+" · "+d, "threads (P)", "ratio (log2)")
	setProcsAxis(p, procs)
	lo, hi := 1.0, 1.0   // medians' extent, 1x included
	blo, bhi := 1.0, 1.0 // error bars' extent
	one, err := plotter.NewLine(plotter.XYs{{X: p.X.Min, Y: 1}, {X: p.X.Max, Y: 1}})
	if err != nil {
		return nil, err
	}
	one.Color, one.Width, one.Dashes = color.Gray{Y: 0x40}, vg.Points(1), []vg.Length{vg.Points(3), vg.Points(2)}
	p.Add(one)
	for i, wk := range works {
		var xy plotter.XYs
		var errs plotter.YErrors
		for _, pr := range procs {
			rr := ix.ratioRange(clk, a, b, wk, d, pr)
			if math.IsNaN(rr.v) || rr.v <= 0 {
				continue
			}
			l, h := rr.v, rr.v
			// A bound of 0 (a repeat measured nothing) or +Inf (a base
			// repeat did) has no place on a log axis: its bar runs a
			// factor of 1e9 out, past the clip below.
			if !math.IsNaN(rr.lo) {
				l = rr.lo
				if l <= 0 {
					l = rr.v * 1e-9
				}
			}
			switch {
			case math.IsInf(rr.hi, 1):
				h = rr.v * 1e9
			case rr.hi > 0:
				h = rr.hi
			}
			lo, hi = min(lo, rr.v), max(hi, rr.v)
			blo, bhi = min(blo, l), max(bhi, h)
			xy = append(xy, plotter.XY{X: jitter(float64(pr), i, len(works)), Y: rr.v})
			errs = append(errs, struct{ Low, High float64 }{rr.v - l, h - rr.v})
		}
		if err := addSeries(p, workStyle[wk], xy, errs); err != nil {
			return nil, err
		}
	}
	// The medians set the range; an error bar may widen it by up to a
	// factor of two each way and is clipped beyond, so one wild repeat
	// cannot squash the lines.
	p.Y.Scale = plot.LogScale{}
	p.Y.Min, p.Y.Max = max(blo, lo/2)/1.1, min(bhi, hi*2)*1.1
	p.Y.Tick.Marker = ratioTicks{}
	return p, nil
}

// latencyTile plots the median p50, p99 and p99.9 at P=pmax of every
// implementation on one workload and dist, with the repeats' range.
func latencyTile(ix index, clk, wk, d string, impls []string, pmax int) (*plot.Plot, error) {
	p := newTile(fmt.Sprintf("%s · %s · P=%d", wk, d, pmax), "percentile", "ns")
	p.X.Tick.Marker = plot.ConstantTicks{{Value: 1, Label: "p50"}, {Value: 2, Label: "p99"}, {Value: 3, Label: "p99.9"}}
	p.X.Min, p.X.Max = 0.7, 3.3
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	for i, im := range impls {
		r := ix.get(clk, im, wk, d, pmax)
		if r == nil {
			continue
		}
		var xy plotter.XYs
		var errs plotter.YErrors
		for k, v := range []float64{r.P50Ns, r.P99Ns, r.P999Ns} {
			if v <= 0 {
				continue
			}
			st := Summarize([][]float64{r.P50Runs, r.P99Runs, r.P999Runs}[k])
			l, h := v, v
			if st.N > 0 && st.Min > 0 {
				l, h = st.Min, st.Max
			}
			xy = append(xy, plotter.XY{X: float64(k+1) + 0.06*(float64(i)-float64(len(impls)-1)/2), Y: v})
			errs = append(errs, struct{ Low, High float64 }{v - l, h - v})
		}
		if err := addSeries(p, implStyle[im], xy, errs); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// plainTicks are gonum's default ticks labelled in the shortest form
// ("25", not "25.00").
type plainTicks struct{}

func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'g', 4, 64)
		}
	}
	return ts
}

// ratioTicks labels a log ratio axis at 1x and at powers of two and
// their midpoints, enough to read between.
type ratioTicks struct{}

func (ratioTicks) Ticks(lo, hi float64) []plot.Tick {
	octaves := math.Log2(hi / lo)
	step := 1
	if octaves > 7 {
		step = 2
	}
	var ts []plot.Tick
	for k := -12; k <= 12; k += step {
		v := math.Ldexp(1, k)
		if v >= lo && v <= hi {
			ts = append(ts, plot.Tick{Value: v, Label: fmtTickRatio(v)})
		}
		// Between 0.5x and 16x on a short axis, the midpoints too.
		if m := v * 1.5; octaves <= 3.5 && k >= -1 && k <= 3 && m >= lo && m <= hi {
			ts = append(ts, plot.Tick{Value: m, Label: fmtTickRatio(m)})
		}
	}
	if len(ts) < 2 {
		ts = append(ts, plot.Tick{Value: lo, Label: fmtTickRatio(lo)}, plot.Tick{Value: hi, Label: fmtTickRatio(hi)})
	}
	return ts
}

func fmtTickRatio(v float64) string {
	if v >= 1 && v == math.Trunc(v) {
		return fmt.Sprintf("%gx", v)
	}
	return fmt.Sprintf("%.3gx", v)
}

// note writes s at the top left of p's data area.
func note(p *plot.Plot, s string) {
	p.Add(noteText{s})
}

// noteText draws a line of text inside the top left of the data area.
type noteText struct{ s string }

func (n noteText) Plot(c draw.Canvas, _ *plot.Plot) {
	sty := draw.TextStyle{Color: color.Gray{Y: 0x20}, Font: font.From(plot.DefaultFont, vg.Points(7)), Handler: plot.DefaultTextHandler, YAlign: draw.YTop}
	c.FillText(sty, vg.Point{X: c.Min.X + vg.Points(3), Y: c.Max.Y - vg.Points(2)}, n.s)
}

func setProcsAxis(p *plot.Plot, procs []int) {
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = intTicks(procs)
	p.X.Min, p.X.Max = float64(procs[0])/1.3, float64(procs[len(procs)-1])*1.3
}

func pinWord(s string) string {
	for _, w := range []string{"took", "partial", "unpinned"} {
		if len(s) >= len(w) && s[:len(w)] == w {
			return w
		}
	}
	return s
}

func newTile(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(10)
	p.X.Label.Text, p.Y.Label.Text = x, y
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font.Size = vg.Points(8)
		a.Tick.Label.Font.Size = vg.Points(8)
	}
	p.Add(plotter.NewGrid())
	return p
}

// intTicks labels the P values.
func intTicks(ps []int) plot.ConstantTicks {
	var t plot.ConstantTicks
	for _, p := range ps {
		t = append(t, plot.Tick{Value: float64(p), Label: fmt.Sprint(p)})
	}
	return t
}

// legendEntry is one line of a grid's legend: a style sample, or (no
// style) a line of explanation.
type legendEntry struct {
	name string
	s    *series
}

func implLegend(impls []string, how ...string) []legendEntry {
	var es []legendEntry
	for _, im := range impls {
		s := implStyle[im]
		name := im
		if im == ImplAtomicAdd {
			es = append(es, legendEntry{"atomicadd (reference", &s}, legendEntry{"  line; it does not set", nil}, legendEntry{"  the y-scale)", nil})
			continue
		}
		es = append(es, legendEntry{name, &s})
	}
	es = append(es, legendEntry{"", nil})
	for _, h := range how {
		es = append(es, legendEntry{h, nil})
	}
	return es
}

func workLegend(works []string) []legendEntry {
	var es []legendEntry
	for _, wk := range works {
		s := workStyle[wk]
		es = append(es, legendEntry{wk, &s})
	}
	return append(es, legendEntry{"", nil}, legendEntry{"points: ratio of medians", nil},
		legendEntry{"bars: min/max to max/min", nil}, legendEntry{"(clipped at 2x past the", nil},
		legendEntry{"  medians' range)", nil}, legendEntry{"grey dashed: 1.0x (even)", nil})
}

// grid is one PNG: a title, a tile per (row, col), a legend column.
type grid struct {
	title, sub string
	rows, cols []string
	legend     []legendEntry
	tile       func(row, col string) (*plot.Plot, error)
}

// render draws g and writes the PNG to path.
func (g grid) render(path string) error {
	nr, nc := len(g.rows), len(g.cols)
	ps := make([][]*plot.Plot, nr)
	for i, rw := range g.rows {
		ps[i] = make([]*plot.Plot, nc)
		for j, cl := range g.cols {
			p, err := g.tile(rw, cl)
			if err != nil {
				return err
			}
			ps[i][j] = p
		}
	}
	// At least as tall as the legend, so a single row of tiles keeps it.
	legendH := vg.Length(len(g.legend))*(vg.Points(9)*1.25+vg.Points(2)) + 8*vg.Millimeter
	w, h := tileW*vg.Length(nc)+legendW, max(tileH*vg.Length(nr), legendH)+header
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(dpi), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)
	ts := draw.TextStyle{Color: color.Black, Font: font.From(plot.DefaultFont, vg.Points(12)), Handler: plot.DefaultTextHandler, XAlign: draw.XCenter, YAlign: draw.YTop}
	dc.FillText(ts, vg.Point{X: w / 2, Y: h - vg.Points(4)}, g.title)
	ts.Font = font.From(plot.DefaultFont, vg.Points(8))
	dc.FillText(ts, vg.Point{X: w / 2, Y: h - vg.Points(21)}, g.sub)

	data := draw.Crop(dc, 0, -legendW, 0, 0)
	tiles := draw.Tiles{Rows: nr, Cols: nc, PadTop: header, PadX: vg.Millimeter * 3, PadY: vg.Millimeter * 3, PadLeft: vg.Millimeter, PadRight: vg.Millimeter * 2, PadBottom: vg.Millimeter}
	cs := plot.Align(ps, tiles, data)
	for i := range ps {
		for j := range ps[i] {
			ps[i][j].Draw(cs[i][j])
		}
	}
	drawLegend(draw.Crop(dc, w-legendW, 0, 0, -header), g.legend)

	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(out, paletted(img.Image())); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// drawLegend draws es top-down in c, a column beside the tiles.
func drawLegend(c draw.Canvas, es []legendEntry) {
	l := plot.NewLegend()
	l.Top, l.Left = true, true
	l.TextStyle.Font.Size = vg.Points(9)
	l.ThumbnailWidth = vg.Points(28)
	l.Padding = vg.Points(2)
	l.XOffs, l.YOffs = vg.Millimeter*2, -vg.Millimeter*4
	for _, e := range es {
		if e.s == nil {
			l.Add(e.name)
			continue
		}
		ln, _ := plotter.NewLine(plotter.XYs{})
		ln.Color, ln.Width, ln.Dashes = e.s.color, vg.Points(1.5), e.s.dashes
		th := []plot.Thumbnailer{ln}
		if e.s.glyph != nil {
			sc, _ := plotter.NewScatter(plotter.XYs{})
			sc.Color, sc.Shape, sc.Radius = e.s.color, e.s.glyph, vg.Points(3)
			th = append(th, sc)
		}
		l.Add(e.name, th...)
	}
	l.Draw(c)
}

// paletted maps a plot onto a small palette (the series colours, greys,
// web-safe colours for the anti-aliased edges), which makes the PNGs a
// third of their full-colour size.
func paletted(src image.Image) *image.Paletted {
	pal := color.Palette{color.White, color.Black}
	for _, c := range okabeIto {
		pal = append(pal, c)
	}
	for g := 8; g < 256; g += 8 {
		pal = append(pal, color.Gray{Y: uint8(g)})
	}
	pal = append(pal, palette.WebSafe...)
	dst := image.NewPaletted(src.Bounds(), pal[:min(len(pal), 256)])
	stddraw.Draw(dst, dst.Bounds(), src, src.Bounds().Min, stddraw.Src)
	return dst
}
