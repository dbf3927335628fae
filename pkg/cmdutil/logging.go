package cmdutil

import (
	"github.com/go-logr/logr"
)

// LazyValues returns l with its WithValues deferred to the lines it
// writes. zap encodes a logger's values when the logger is made, and
// controller-runtime makes two per reconcile (the object's name, the
// reconcile ID) whose lines, at the default verbosity, are almost never
// written: 6 % of the agent's CPU under load (docs/performance.md). The
// lines written are the same, values in the same order.
func LazyValues(l logr.Logger) logr.Logger {
	sink := l.GetSink()
	if sink == nil {
		return l
	}
	// The sink is already initialized with l's call depth; Info and Error
	// here add one frame between the caller and it.
	if cd, ok := sink.(logr.CallDepthLogSink); ok {
		sink = cd.WithCallDepth(1)
	}
	return logr.New(&lazySink{sink: sink})
}

// lazySink holds the values given to WithValues and hands them to the
// sink under it with each line, ahead of the line's own, where the sink
// would have written them.
type lazySink struct {
	sink   logr.LogSink
	values []any
}

var _ logr.CallDepthLogSink = &lazySink{}

// Init does nothing: the sink under it was initialized when made.
func (s *lazySink) Init(logr.RuntimeInfo) {}

func (s *lazySink) Enabled(level int) bool { return s.sink.Enabled(level) }

func (s *lazySink) Info(level int, msg string, kv ...any) {
	s.sink.Info(level, msg, s.with(kv)...)
}

func (s *lazySink) Error(err error, msg string, kv ...any) {
	s.sink.Error(err, msg, s.with(kv)...)
}

// with returns the held values followed by kv.
func (s *lazySink) with(kv []any) []any {
	if len(s.values) == 0 {
		return kv
	}
	return append(s.values[:len(s.values):len(s.values)], kv...)
}

func (s *lazySink) WithValues(kv ...any) logr.LogSink {
	values := make([]any, 0, len(s.values)+len(kv))
	return &lazySink{sink: s.sink, values: append(append(values, s.values...), kv...)}
}

func (s *lazySink) WithName(name string) logr.LogSink {
	return &lazySink{sink: s.sink.WithName(name), values: s.values}
}

func (s *lazySink) WithCallDepth(depth int) logr.LogSink {
	cd, ok := s.sink.(logr.CallDepthLogSink)
	if !ok {
		return s
	}
	return &lazySink{sink: cd.WithCallDepth(depth), values: s.values}
}
