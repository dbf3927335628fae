package replay

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Plot size and margins, in pixels.
const (
	plotWidth = 1000
	panelH    = 260
	marginL   = 70
	marginR   = 20
	marginTop = 40
	panelGap  = 50
)

// palette gives each policy, in Policies order, its colour.
var palette = []color.RGBA{
	{31, 119, 180, 255}, // blue
	{255, 127, 14, 255}, // orange
	{44, 160, 44, 255},  // green
	{214, 39, 40, 255},  // red
	{148, 103, 189, 255},
	{140, 86, 75, 255},
}

// WritePNG draws the GPU utilisation (top) and the queue length (below)
// of each result over simulated time, and, when the trace has priorities,
// the high-priority Jobs waiting (bottom): one line per policy (and
// preemption), with a legend.
func WritePNG(w io.Writer, results []*Result) error {
	var end float64
	maxQueue, maxHigh, high := 1, 1, false
	for _, r := range results {
		high = high || r.HighPriority > 0
		for _, s := range r.Series {
			end = max(end, s.Time)
			maxQueue = max(maxQueue, s.Queued)
			maxHigh = max(maxHigh, s.HighQueued)
		}
	}
	n := 2
	if high {
		n = 3
	}
	plotHeight := marginTop + n*panelH + (n-1)*panelGap + 60
	img := image.NewRGBA(image.Rect(0, 0, plotWidth, plotHeight))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	if end <= 0 {
		end = 1
	}
	panels := []struct {
		title string
		top   int
		value func(*Result, Sample) float64
		max   float64
		unit  string
	}{
		{"GPUs in use (% of the fleet's)", marginTop, func(r *Result, s Sample) float64 { return 100 * float64(s.UsedGPUs) / float64(r.TotalGPUs) }, 100, "%"},
		{"Jobs waiting", marginTop + panelH + panelGap, func(_ *Result, s Sample) float64 { return float64(s.Queued) }, float64(maxQueue), ""},
	}
	if high {
		panels = append(panels, struct {
			title string
			top   int
			value func(*Result, Sample) float64
			max   float64
			unit  string
		}{"High-priority Jobs waiting", marginTop + 2*(panelH+panelGap), func(_ *Result, s Sample) float64 { return float64(s.HighQueued) }, float64(maxHigh), ""})
	}
	grey := color.RGBA{200, 200, 200, 255}
	for _, p := range panels {
		x0, x1, y0, y1 := marginL, plotWidth-marginR, p.top, p.top+panelH
		for k := 0; k <= 4; k++ {
			y := y1 - k*panelH/4
			line(img, x0, y, x1, y, grey)
			text(img, 4, y+4, fmt.Sprintf("%.0f%s", p.max*float64(k)/4, p.unit), color.Black)
		}
		line(img, x0, y0, x0, y1, color.Black)
		text(img, x0, y0-8, p.title, color.Black)
		for i, r := range results {
			c := palette[i%len(palette)]
			px, py := -1, -1
			for _, s := range r.Series {
				x := x0 + int(s.Time/end*float64(x1-x0))
				y := y1 - int(p.value(r, s)/p.max*float64(panelH))
				if px >= 0 {
					line(img, px, py, x, py, c) // a step: the value holds until the next instant
					line(img, x, py, x, y, c)
				}
				px, py = x, y
			}
		}
	}
	axis := marginTop + n*panelH + (n-1)*panelGap
	text(img, marginL, axis+18, "0", color.Black)
	last := fmt.Sprintf("%.1f h of simulated time", end/3600)
	text(img, plotWidth-marginR-7*len(last), axis+18, last, color.Black)
	x := marginL
	for i, r := range results {
		c := palette[i%len(palette)]
		y := axis + 42
		for k := range 3 {
			line(img, x, y-4+k, x+24, y-4+k, c)
		}
		label := string(r.Policy)
		if r.Preemption != "" && r.Preemption != NoPreemption {
			label += " + preempt " + string(r.Preemption)
		}
		text(img, x+30, y, label, color.Black)
		x += 30 + 7*len(label) + 30
	}
	return png.Encode(w, img)
}

// line draws a straight line (Bresenham).
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.Color) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	err := dx + dy
	for {
		img.Set(x0, y0, c)
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * err
		if e2 >= dy {
			err += dy
			x0 += sx
		}
		if e2 <= dx {
			err += dx
			y0 += sy
		}
	}
}

func abs(v int) int { return max(v, -v) }

func sign(v int) int {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}

// text writes s with its baseline at y.
func text(img *image.RGBA, x, y int, s string, c color.Color) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}
