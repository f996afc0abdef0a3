package capacity

import (
	"image/color"
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// okabeIto is the colour-blind-safe palette bench/matrix uses.
var okabeIto = []color.RGBA{
	{R: 0x00, G: 0x72, B: 0xb2, A: 0xff}, // blue
	{R: 0xd5, G: 0x5e, B: 0x00, A: 0xff}, // vermillion
	{R: 0x00, G: 0x9e, B: 0x73, A: 0xff}, // bluish green
	{R: 0xe6, G: 0x9f, B: 0x00, A: 0xff}, // orange
	{R: 0xcc, G: 0x79, B: 0xa7, A: 0xff}, // reddish purple
	{R: 0x56, G: 0xb4, B: 0xe9, A: 0xff}, // sky blue
}

var glyphs = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.PyramidGlyph{}, draw.CrossGlyph{}, draw.PlusGlyph{}}

// floorPct is where a measured 0% is drawn on the log axis.
const floorPct = 1e-4

// Plot writes two PNG plots of rows against the number of keys at their
// limit (log scales): the fresh keys denied (measured, solid, and the
// model's prediction, dashed) to deniedPath, and the share of the keys
// that got their burst to gotPath.
func Plot(rows []Row, deniedPath, gotPath string) error {
	var names []string
	for _, r := range rows {
		if !slices.Contains(names, r.Subject) {
			names = append(names, r.Subject)
		}
	}
	mk := func(title, ylabel string) *plot.Plot {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = "keys at full debt (each took its burst of 20 at one instant)"
		p.Y.Label.Text = ylabel
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Add(plotter.NewGrid())
		return p
	}
	den := mk("Fresh keys denied one token (innocent denials); dashed: the model", "fresh keys denied, % (0 drawn at 0.0001)")
	// The y axis is linear in log10(%) with decade labels: gonum's
	// LogScale left a band of empty space above the plot.
	den.Y.Min, den.Y.Max = math.Log10(floorPct), 2
	den.Y.Tick.Marker = plot.ConstantTicks(logTicks())
	den.Legend.Top, den.Legend.Left = false, false // bottom right: empty there
	got := mk("Keys that got their whole burst", "keys admitted their burst, %")
	got.Y.Min, got.Y.Max = 0, 100
	got.Legend.Top, got.Legend.Left = false, true // bottom left: empty there
	for i, name := range names {
		var meas, model, gotPts plotter.XYs
		for _, r := range rows {
			if r.Subject != name {
				continue
			}
			x := float64(r.Keys)
			meas = append(meas, plotter.XY{X: x, Y: math.Log10(math.Max(100*r.PeekDenied, floorPct))})
			model = append(model, plotter.XY{X: x, Y: math.Log10(math.Max(100*r.PredictDenied, floorPct))})
			gotPts = append(gotPts, plotter.XY{X: x, Y: 100 * r.Got})
		}
		c := okabeIto[i%len(okabeIto)]
		add := func(p *plot.Plot, xy plotter.XYs, label string, dashed bool) error {
			l, s, err := plotter.NewLinePoints(xy)
			if err != nil {
				return err
			}
			l.Color, l.Width = c, vg.Points(1.5)
			s.Color, s.Shape = c, glyphs[i%len(glyphs)]
			if dashed {
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
				l.Width = vg.Points(1)
				p.Add(l)
				return nil
			}
			p.Add(l, s)
			p.Legend.Add(label, l, s)
			return nil
		}
		if err := add(den, meas, name, false); err != nil {
			return err
		}
		if err := add(den, model, "", true); err != nil {
			return err
		}
		if err := add(got, gotPts, name, false); err != nil {
			return err
		}
	}
	if err := den.Save(8*vg.Inch, 5*vg.Inch, deniedPath); err != nil {
		return err
	}
	return got.Save(8*vg.Inch, 5*vg.Inch, gotPath)
}

// logTicks labels the decades of the denial axis, 0.0001 to 100.
func logTicks() []plot.Tick {
	var ts []plot.Tick
	for _, v := range []float64{1e-4, 1e-3, 1e-2, 0.1, 1, 10, 100} {
		ts = append(ts, plot.Tick{Value: math.Log10(v), Label: strconv.FormatFloat(v, 'f', -1, 64)})
	}
	return ts
}
