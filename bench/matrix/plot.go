package matrix

import (
	"fmt"
	"image"
	"image/color"
	"image/color/palette"
	stddraw "image/draw"
	"image/png"
	"os"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// implColor gives every implementation the same colour in every plot.
var implColor = map[string]color.RGBA{
	ImplLockfree:   {R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	ImplReference:  {R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	ImplRotator:    {R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	ImplRefRotator: {R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	ImplAtomicAdd:  {R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff},
	ImplRateMap:    {R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
}

// Plot sizes: one tile per workload x dist.
const (
	tileW  = 6.5 * vg.Centimeter
	tileH  = 5 * vg.Centimeter
	header = 1.2 * vg.Centimeter
	dpi    = 80
)

// WritePlots writes, per clock mode, throughput-<clock>.png (Mops/s vs
// threads, one tile per workload x dist, one line per implementation)
// and latency-<clock>.png (p50, p99, p99.9 at the largest P, log scale)
// into dir, and returns the paths written.
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
	sub := fmt.Sprintf("%s, %d CPUs, %s/%s, %s, commit %s; pinning %s", m.CPUModel, m.Cores, m.GOOS, m.GOARCH, m.GoVersion, m.Commit, pinWord(m.Pinning))
	var paths []string
	for _, clk := range clocks {
		ci := slices.DeleteFunc(slices.Clone(impls), func(im string) bool { return !runsUnder(im, clk) })
		thr := tileFunc(func(wk, d string, first bool) (*plot.Plot, error) {
			p := newTile(wk+" · "+d, "threads (P)", "Mops/s")
			p.X.Scale = plot.LogScale{}
			p.X.Tick.Marker = intTicks(procs)
			p.X.Min, p.X.Max = float64(procs[0])/1.3, float64(procs[len(procs)-1])*1.3
			p.Y.Min = 0
			for _, im := range ci {
				var xy plotter.XYs
				for _, pr := range procs {
					if r := ix.get(clk, im, wk, d, pr); r != nil {
						xy = append(xy, plotter.XY{X: float64(pr), Y: r.Mops})
					}
				}
				if err := addLine(p, im, xy, first); err != nil {
					return nil, err
				}
			}
			return p, nil
		})
		pmax := procs[len(procs)-1]
		lat := tileFunc(func(wk, d string, first bool) (*plot.Plot, error) {
			p := newTile(fmt.Sprintf("%s · %s · P=%d", wk, d, pmax), "percentile", "ns")
			p.X.Tick.Marker = plot.ConstantTicks{{Value: 1, Label: "p50"}, {Value: 2, Label: "p99"}, {Value: 3, Label: "p99.9"}}
			p.X.Min, p.X.Max = 0.7, 3.3
			p.Y.Scale = plot.LogScale{}
			p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
			for _, im := range ci {
				r := ix.get(clk, im, wk, d, pmax)
				if r == nil {
					continue
				}
				var xy plotter.XYs
				for i, v := range []float64{r.P50Ns, r.P99Ns, r.P999Ns} {
					if v > 0 {
						xy = append(xy, plotter.XY{X: float64(i + 1), Y: v})
					}
				}
				if err := addLine(p, im, xy, first); err != nil {
					return nil, err
				}
			}
			return p, nil
		})
		for _, g := range []struct {
			name, title string
			tiles       tileFunc
		}{
			{"throughput-" + clk + ".png", fmt.Sprintf("Throughput vs threads, clock=%s, %v per cell", clk, fmtDurMs(m.DurationMs)), thr},
			{"latency-" + clk + ".png", fmt.Sprintf("Latency percentiles at P=%d, clock=%s (1 op in %d timed)", pmax, clk, m.SampleEvery), lat},
		} {
			path := filepath.Join(dir, g.name)
			if err := renderGrid(path, g.title, sub, works, dists, g.tiles); err != nil {
				return paths, err
			}
			paths = append(paths, path)
		}
	}
	return paths, nil
}

// tileFunc builds the plot of one tile; first is the top-left tile, which
// carries the legend.
type tileFunc func(work, dist string, first bool) (*plot.Plot, error)

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
	p.Title.TextStyle.Font.Size = vg.Points(9)
	p.X.Label.Text, p.Y.Label.Text = x, y
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font.Size = vg.Points(8)
		a.Tick.Label.Font.Size = vg.Points(7)
	}
	p.Add(plotter.NewGrid())
	return p
}

func addLine(p *plot.Plot, impl string, xy plotter.XYs, legend bool) error {
	if len(xy) == 0 {
		return nil
	}
	l, s, err := plotter.NewLinePoints(xy)
	if err != nil {
		return err
	}
	c := implColor[impl]
	l.Color, s.Color = c, c
	l.Width = vg.Points(1.2)
	s.Radius = vg.Points(2)
	p.Add(l, s)
	if legend {
		p.Legend.Add(impl, l, s)
		p.Legend.Top, p.Legend.Left = true, true
		p.Legend.TextStyle.Font.Size = vg.Points(7)
	}
	return nil
}

// intTicks labels the P values.
func intTicks(ps []int) plot.ConstantTicks {
	var t plot.ConstantTicks
	for _, p := range ps {
		t = append(t, plot.Tick{Value: float64(p), Label: fmt.Sprint(p)})
	}
	return t
}

// renderGrid draws one tile per (work, dist) under a title and writes the
// PNG to path.
func renderGrid(path, title, sub string, works, dists []string, f tileFunc) error {
	rows, cols := len(works), len(dists)
	ps := make([][]*plot.Plot, rows)
	for i, wk := range works {
		ps[i] = make([]*plot.Plot, cols)
		for j, d := range dists {
			p, err := f(wk, d, i == 0 && j == 0)
			if err != nil {
				return err
			}
			ps[i][j] = p
		}
	}
	w, h := tileW*vg.Length(cols), tileH*vg.Length(rows)+header
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(dpi), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)
	ts := draw.TextStyle{Color: color.Black, Font: font.From(plot.DefaultFont, vg.Points(11)), Handler: plot.DefaultTextHandler, XAlign: draw.XCenter, YAlign: draw.YTop}
	dc.FillText(ts, vg.Point{X: w / 2, Y: h - vg.Points(4)}, title)
	ts.Font = font.From(plot.DefaultFont, vg.Points(8))
	dc.FillText(ts, vg.Point{X: w / 2, Y: h - vg.Points(19)}, sub)
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadTop: header, PadX: vg.Millimeter * 2, PadY: vg.Millimeter * 2, PadLeft: vg.Millimeter, PadRight: vg.Millimeter * 2, PadBottom: vg.Millimeter}
	cs := plot.Align(ps, tiles, dc)
	for i := range ps {
		for j := range ps[i] {
			ps[i][j].Draw(cs[i][j])
		}
	}
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

// paletted maps a plot onto a small palette (the implementation colours,
// greys, web-safe colours for the anti-aliased edges), which makes the
// PNGs a third of their full-colour size.
func paletted(src image.Image) *image.Paletted {
	pal := color.Palette{color.White, color.Black}
	for _, im := range AllImpls {
		pal = append(pal, implColor[im])
	}
	for g := 8; g < 256; g += 8 {
		pal = append(pal, color.Gray{Y: uint8(g)})
	}
	pal = append(pal, palette.WebSafe...)
	dst := image.NewPaletted(src.Bounds(), pal[:min(len(pal), 256)])
	stddraw.Draw(dst, dst.Bounds(), src, src.Bounds().Min, stddraw.Src)
	return dst
}
