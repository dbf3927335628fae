package kubectlstrata

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"
)

// Output formats of the live views.
var liveFormats = []string{"table", "json", "yaml"}

// width is the number of columns the tables aim to fit.
const width = 100

// checkFormat rejects an unknown -o value before anything is read.
func checkFormat(format string) error {
	for _, f := range liveFormats {
		if format == f {
			return nil
		}
	}
	return fmt.Errorf("unknown output format %q (want one of %s)", format, strings.Join(liveFormats, ", "))
}

// writeStructured prints v as indented JSON or as YAML.
func writeStructured(w io.Writer, v any, format string) error {
	var data []byte
	var err error
	if format == "json" {
		data, err = json.MarshalIndent(v, "", "  ")
		data = append(data, '\n')
	} else {
		data, err = yaml.Marshal(v)
	}
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}

// ConditionView is a condition as the views show it.
type ConditionView struct {
	Status             metav1.ConditionStatus `json:"status"`
	Reason             string                 `json:"reason,omitempty"`
	Message            string                 `json:"message,omitempty"`
	LastTransitionTime *metav1.Time           `json:"lastTransitionTime,omitempty"`
}

// conditionOf is the condition of type t, or nil when there is none.
func conditionOf(conds []metav1.Condition, t string) *ConditionView {
	c := meta.FindStatusCondition(conds, t)
	if c == nil {
		return nil
	}
	v := &ConditionView{Status: c.Status, Reason: c.Reason, Message: c.Message}
	if !c.LastTransitionTime.IsZero() {
		v.LastTransitionTime = c.LastTransitionTime.DeepCopy()
	}
	return v
}

// statusText is "True", or the status and the reason when not True:
// "False (Unreachable)". A missing condition is "Unknown".
func statusText(c *ConditionView) string {
	switch {
	case c == nil:
		return string(metav1.ConditionUnknown)
	case c.Status == metav1.ConditionTrue || c.Reason == "":
		return string(c.Status)
	}
	return fmt.Sprintf("%s (%s)", c.Status, c.Reason)
}

// age is how long ago t was, as kubectl prints ages ("40s", "5m", "3h"),
// or "-" without a time.
func age(t *metav1.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(max(now.Sub(t.Time), 0))
}

// bar draws free of capacity in ten cells, '#' for free: a cell is full
// only when all of its share is free, and any free amount shows.
func bar(free, capacity int64) string {
	const cells = 10
	n := 0
	if capacity > 0 {
		free = min(max(free, 0), capacity)
		n = int(free * cells / capacity)
		if n == 0 && free > 0 {
			n = 1
		}
	}
	return "[" + strings.Repeat("#", n) + strings.Repeat("-", cells-n) + "]"
}

// amount prints milli-units as whole units ("64"), or with one decimal
// ("95.5") when not whole.
func amount(milli int64) string {
	if milli%1000 == 0 {
		return fmt.Sprint(milli / 1000)
	}
	return fmt.Sprintf("%.1f", float64(milli)/1000)
}

// wrap breaks text at spaces into lines of at most width columns: the
// first starts with first, the others with indent (both usually ending in
// spaces). Words longer than a line stay whole.
func wrap(first, indent, text string) []string {
	var lines []string
	line, empty := first, true
	for _, word := range strings.Fields(text) {
		if !empty && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line, empty = indent, true
		}
		if !empty {
			line += " "
		}
		line += word
		empty = false
	}
	return append(lines, strings.TrimRight(line, " "))
}

// writeLines prints lines, each ended by a newline.
func writeLines(w io.Writer, lines ...string) error {
	for _, l := range lines {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return err
		}
	}
	return nil
}
