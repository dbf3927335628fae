package admitevents

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
)

func TestMessage(t *testing.T) {
	for _, tc := range []struct {
		name  string
		count int
		names []string
		want  string
	}{
		{name: "one", count: 1, names: []string{"ml/a"}, want: "1 workload admitted in the last 30s: ml/a"},
		{name: "all named", count: 3, names: []string{"ml/a", "ml/b", "ml/c"}, want: "3 workloads admitted in the last 30s: ml/a, ml/b, ml/c"},
		{name: "more than named", count: 12, names: []string{"ml/a", "ml/b", "ml/c", "ml/d", "ml/e"},
			want: "12 workloads admitted in the last 30s: ml/a, ml/b, ml/c, ml/d, ml/e and 7 more"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Message(tc.count, tc.names, 30*time.Second)); diff != "" {
				t.Errorf("Message (-want +got):\n%s", diff)
			}
		})
	}
}

// drain returns what the fake recorder recorded so far.
func drain(rec *events.FakeRecorder) []string {
	var got []string
	for {
		select {
		case e := <-rec.Events:
			got = append(got, e)
		default:
			return got
		}
	}
}

func admission(queue, wl string) Admission {
	return Admission{ClusterQueue: queue, Workload: wl, Reason: "Started", Note: "Admitted by ClusterQueue " + queue}
}

func TestRecorder(t *testing.T) {
	for _, tc := range []struct {
		name       string
		mode       configv1beta1.AdmissionEvents
		admissions []Admission
		now        []string // recorded at once
		flushed    []string // recorded by a flush
	}{
		{
			name:       "per workload: one event each, at once",
			mode:       configv1beta1.AdmissionEventsPerWorkload,
			admissions: []Admission{admission("q1", "ml/a"), admission("q1", "ml/b")},
			now:        []string{"Normal Started Admitted by ClusterQueue q1", "Normal Started Admitted by ClusterQueue q1"},
		},
		{
			name:       "per ClusterQueue, but none named: its own event",
			mode:       configv1beta1.AdmissionEventsPerClusterQueue,
			admissions: []Admission{admission("", "ml/a")},
			now:        []string{"Normal Started Admitted by ClusterQueue "},
		},
		{
			name:       "per ClusterQueue: nothing at once, one digest per queue, in name order",
			mode:       configv1beta1.AdmissionEventsPerClusterQueue,
			admissions: []Admission{admission("q2", "ml/c"), admission("q1", "ml/a"), admission("q1", "ml/b")},
			flushed: []string{
				"Normal Admitted 2 workloads admitted in the last 30s: ml/a, ml/b",
				"Normal Admitted 1 workload admitted in the last 30s: ml/c",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := events.NewFakeRecorder(100)
			r := New(rec, tc.mode, "Admit")
			for _, a := range tc.admissions {
				r.Admitted(a)
			}
			if diff := cmp.Diff(tc.now, drain(rec)); diff != "" {
				t.Errorf("recorded at once (-want +got):\n%s", diff)
			}
			r.Flush()
			if diff := cmp.Diff(tc.flushed, drain(rec)); diff != "" {
				t.Errorf("recorded by the flush (-want +got):\n%s", diff)
			}
			r.Flush()
			if got := drain(rec); len(got) != 0 {
				t.Errorf("a second flush recorded %v, want nothing", got)
			}
		})
	}
}

func TestRecorderStartsADigestEveryInterval(t *testing.T) {
	rec := events.NewFakeRecorder(100)
	clk := clocktesting.NewFakeClock(time.Now())
	r := New(rec, configv1beta1.AdmissionEventsPerClusterQueue, "Admit").WithClock(clk)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.Start(ctx)
	}()
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	r.Admitted(admission("q1", "ml/a"))
	clk.Step(DefaultInterval)
	if got, want := <-rec.Events, "Normal Admitted 1 workload admitted in the last 30s: ml/a"; got != want {
		t.Errorf("after an interval: %q, want %q", got, want)
	}
	r.Admitted(admission("q1", "ml/b"))
	cancel()
	<-done
	if got, want := drain(rec), []string{"Normal Admitted 1 workload admitted in the last 30s: ml/b"}; !cmp.Equal(got, want) {
		t.Errorf("on stop: %v, want %v", got, want)
	}
}

// sink keeps what a real events broadcaster writes.
type sink struct {
	created chan *eventsv1.Event
	patched chan *eventsv1.Event
}

func (s *sink) Create(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	s.created <- e
	return e, nil
}

func (s *sink) Update(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return e, nil
}

func (s *sink) Patch(_ context.Context, e *eventsv1.Event, _ []byte) (*eventsv1.Event, error) {
	s.patched <- e
	return e, nil
}

// TestDigestsAreNotFoldedIntoASeries checks, through client-go's own
// events broadcaster, that a ClusterQueue's second digest is an event of
// its own with its own note, not a count on the first one's series.
func TestDigestsAreNotFoldedIntoASeries(t *testing.T) {
	s := &sink{created: make(chan *eventsv1.Event, 10), patched: make(chan *eventsv1.Event, 10)}
	b := events.NewBroadcaster(s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.StartRecordingToSink(ctx.Done())
	defer b.Shutdown()
	scheme := runtime.NewScheme()
	if err := strata.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	r := New(b.NewRecorder(scheme, "strata-agent"), configv1beta1.AdmissionEventsPerClusterQueue, "Admit")
	wl := func(name, rv string) Admission {
		a := admission("q1", "ml/"+name)
		a.Related = &strata.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, ResourceVersion: rv}}
		return a
	}
	var notes []string
	for _, a := range []Admission{wl("a", "1"), wl("b", "2"), wl("a", "3")} {
		r.Admitted(a)
		r.Flush()
		select {
		case e := <-s.created:
			notes = append(notes, e.Note)
		case e := <-s.patched:
			t.Fatalf("digest for %s folded into the series of %q", a.Workload, e.Note)
		case <-time.After(wait.ForeverTestTimeout):
			t.Fatalf("digest for %s never written", a.Workload)
		}
	}
	want := []string{
		"1 workload admitted in the last 30s: ml/a",
		"1 workload admitted in the last 30s: ml/b",
		"1 workload admitted in the last 30s: ml/a",
	}
	if diff := cmp.Diff(want, notes); diff != "" {
		t.Errorf("digests written (-want +got):\n%s", diff)
	}
}
