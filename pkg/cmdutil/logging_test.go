package cmdutil

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	uberzap "go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// TestLazyValuesWritesTheSameLines logs the same calls through a zap
// logger and through LazyValues of one, directly and through
// controller-runtime's delegating logger, and compares what each wrote,
// the caller included.
func TestLazyValuesWritesTheSameLines(t *testing.T) {
	logAll := func(l logr.Logger) {
		l.Info("plain")
		w := l.WithName("ctrl").WithValues("controller", "job", "kind", "Job")
		w = w.WithValues("name", "a", "reconcileID", 7)
		w.Info("with values", "step", "start")
		w.V(1).Info("not written")
		w.V(2).WithValues("hidden", true).Info("not written either")
		w.Error(errors.New("boom"), "failed", "attempt", 2)
		w.WithName("sub").WithValues("nested", []string{"x"}).Info("nested")
		w.WithCallDepth(0).Info("depth")
		helper(w)
	}
	newZap := func(buf *bytes.Buffer) logr.Logger {
		return zap.New(zap.WriteTo(buf), zap.Level(zapcore.InfoLevel), func(o *zap.Options) {
			o.EncoderConfigOptions = append(o.EncoderConfigOptions, func(c *zapcore.EncoderConfig) { c.TimeKey = "" })
			o.ZapOpts = append(o.ZapOpts, uberzap.AddCaller())
		})
	}
	var eager, lazy bytes.Buffer
	for _, lazily := range []bool{false, true} {
		l := newZap(&eager)
		if lazily {
			l = LazyValues(newZap(&lazy))
		}
		logAll(l) // one line for both: error lines have a stack trace
	}
	if diff := cmp.Diff(lines(eager.String()), lines(lazy.String())); diff != "" {
		t.Errorf("lines written (-eager +lazy):\n%s", diff)
	}
	if n := len(lines(lazy.String())); n != 6 {
		t.Errorf("%d lines written, want 6:\n%s", n, lazy.String())
	}

	// As the daemons use it: behind controller-runtime's logger, which
	// hands out loggers before it is set.
	early := ctrllog.Log.WithName("early").WithValues("a", 1)
	var set bytes.Buffer
	ctrllog.SetLogger(LazyValues(newZap(&set)))
	early.Info("after set")
	ctrllog.Log.WithName("late").WithValues("b", 2).Info("after set")
	got := lines(set.String())
	if len(got) != 2 {
		t.Fatalf("%d lines written through controller-runtime's logger, want 2:\n%s", len(got), set.String())
	}
	for _, want := range []string{`"logger":"early"`, `"a":1`, `"caller":"cmdutil/logging_test.go:`} {
		if !strings.Contains(got[0], want) {
			t.Errorf("line %s does not have %s", got[0], want)
		}
	}
	for _, want := range []string{`"logger":"late"`, `"b":2`, `"caller":"cmdutil/logging_test.go:`} {
		if !strings.Contains(got[1], want) {
			t.Errorf("line %s does not have %s", got[1], want)
		}
	}
}

func helper(l logr.Logger) {
	l.WithCallDepth(1).Info("from a helper")
}

func lines(s string) []string {
	return strings.Split(strings.TrimSpace(s), "\n")
}

// BenchmarkReconcileLogger is what controller-runtime does with the
// logger for each reconcile (two WithValues, a line below the
// verbosity), with a zap logger and with LazyValues of one.
func BenchmarkReconcileLogger(b *testing.B) {
	for _, lazily := range []bool{false, true} {
		name := "zap"
		if lazily {
			name = "lazy"
		}
		b.Run(name, func(b *testing.B) {
			l := zap.New(zap.WriteTo(io.Discard)).WithValues("controller", "job", "controllerGroup", "batch", "controllerKind", "Job")
			if lazily {
				l = LazyValues(zap.New(zap.WriteTo(io.Discard))).WithValues("controller", "job", "controllerGroup", "batch", "controllerKind", "Job")
			}
			b.ReportAllocs()
			for b.Loop() {
				r := l.WithValues("Job", "default/train", "namespace", "default", "name", "train").WithValues("reconcileID", "6f1c")
				r.V(2).Info("Reconciling")
			}
		})
	}
}
