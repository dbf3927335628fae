package fleet

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/jobs/batchjob"
	"strata.dev/strata/pkg/jobs/jobset"
	"strata.dev/strata/pkg/placement"
	"strata.dev/strata/pkg/tas"
)

const rack = "cloud.provider.com/topology-rack"

var now = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// summary is a published summary of flavor: one rack of two 8-cpu nodes.
func summary(t *testing.T, flavor string, generation int64, age time.Duration) strata.CapacitySummary {
	t.Helper()
	s := tas.NewSnapshot([]string{rack, strata.HostnameLabel}, nil)
	for _, n := range []string{"n1", "n2"} {
		s.SetNode(tas.Node{Name: n, Ready: true, Labels: map[string]string{rack: "r1", strata.HostnameLabel: n},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110")}})
	}
	st, err := s.Summarize(math.MaxInt)
	if err != nil {
		t.Fatal(err)
	}
	st.SummaryGeneration = generation
	st.ObservedTime = &metav1.Time{Time: now.Add(-age)}
	return strata.CapacitySummary{Spec: strata.CapacitySummarySpec{Flavor: flavor}, Status: st}
}

func TestRefresh(t *testing.T) {
	const stale = 2 * time.Minute
	type view struct {
		Flavor, Unavailable string
		Generation          int64
		Reserved            bool
	}
	views := func(ts map[string]*placement.Target) []view {
		var out []view
		for flavor, tg := range ts {
			out = append(out, view{flavor, tg.Unavailable, tg.Generation(), tg.TakesCapacity("job")})
		}
		slices.SortFunc(out, func(a, b view) int { return strings.Compare(a.Flavor, b.Flavor) })
		return out
	}
	tooLarge := summary(t, "huge", 1, 0)
	tooLarge.Status.Domains, tooLarge.Status.Vectors = nil, nil
	tooLarge.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "TooLarge", Message: "no domains published"}}

	// A domain claiming two billion nodes: expanded, it would take the
	// hub's memory (it did, at every restart).
	hostile := summary(t, "a100", 2, time.Second)
	hostile.Status.Domains[0].Free[1] = 2_000_000_000
	malformed := summary(t, "a100", 2, time.Second)
	malformed.Status.Domains[0].Free = append(malformed.Status.Domains[0].Free, 7)

	cases := map[string]struct {
		before    []strata.CapacitySummary // a first refresh, then job reserved on a100
		worker    Worker
		connected bool
		summaries []strata.CapacitySummary
		want      []view
	}{
		"fresh summaries": {
			worker: Worker{Name: "w"}, connected: true,
			summaries: []strata.CapacitySummary{summary(t, "a100", 1, time.Second)},
			want:      []view{{Flavor: "a100", Generation: 1}},
		},
		"cordoned": {
			worker: Worker{Name: "w", Cordoned: true}, connected: true,
			summaries: []strata.CapacitySummary{summary(t, "a100", 1, time.Second)},
			want:      []view{{Flavor: "a100", Generation: 1, Unavailable: "cordoned (spec.unschedulable)"}},
		},
		"stale": {
			worker: Worker{Name: "w"}, connected: true,
			summaries: []strata.CapacitySummary{summary(t, "a100", 1, 3*time.Minute)},
			want:      []view{{Flavor: "a100", Generation: 1, Unavailable: "summary stale: observed 2026-11-23T11:57:00Z, more than 2m0s ago"}},
		},
		"not published yet: unavailable, not absent": {
			worker: Worker{Name: "w"}, connected: true,
			summaries: []strata.CapacitySummary{{Spec: strata.CapacitySummarySpec{Flavor: "a100"}}, summary(t, "h100", 1, time.Second)},
			want:      []view{{Flavor: "a100", Generation: -1, Unavailable: "summary not published yet"}, {Flavor: "h100", Generation: 1}},
		},
		"too large to publish any levels: says so": {
			worker: Worker{Name: "w"}, connected: true,
			summaries: []strata.CapacitySummary{func() strata.CapacitySummary {
				s := tooLarge
				s.Spec.Flavor, s.Status.Levels = "wide", nil
				return s
			}()},
			want: []view{{Flavor: "wide", Generation: -1, Unavailable: "summary not ready (TooLarge): no domains published"}},
		},
		"too large to publish": {
			worker: Worker{Name: "w"}, connected: true,
			summaries: []strata.CapacitySummary{tooLarge},
			want:      []view{{Flavor: "huge", Generation: 1, Unavailable: "summary not ready (TooLarge): no domains published"}},
		},
		"too many dispatches to publish: the target stays, unavailable, with its reservations": {
			before: []strata.CapacitySummary{summary(t, "a100", 1, time.Second)},
			worker: Worker{Name: "w"}, connected: true,
			summaries: []strata.CapacitySummary{func() strata.CapacitySummary {
				s := summary(t, "a100", 2, time.Second)
				s.Status.Domains, s.Status.Vectors = nil, nil
				s.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "TooManyDispatches", Message: "no domains or dispatches published"}}
				return s
			}()},
			want: []view{{Flavor: "a100", Generation: 2, Reserved: true, Unavailable: "summary not ready (TooManyDispatches): no domains or dispatches published"}},
		},
		"a new generation keeps the reservations": {
			before: []strata.CapacitySummary{summary(t, "a100", 1, time.Second)},
			worker: Worker{Name: "w"}, connected: true,
			summaries: []strata.CapacitySummary{summary(t, "a100", 2, time.Second)},
			want:      []view{{Flavor: "a100", Generation: 2, Reserved: true}},
		},
		"a flavor gone": {
			before: []strata.CapacitySummary{summary(t, "a100", 1, time.Second), summary(t, "h100", 1, time.Second)},
			worker: Worker{Name: "w"}, connected: true,
			summaries: []strata.CapacitySummary{summary(t, "h100", 2, time.Second)},
			want:      []view{{Flavor: "h100", Generation: 2}},
		},
		"a hostile first summary: its target is unavailable and says why, the others serve": {
			worker: Worker{Name: "w"}, connected: true,
			summaries: []strata.CapacitySummary{func() strata.CapacitySummary {
				h := hostile
				h.Spec.Flavor = "h100"
				return h
			}(), summary(t, "a100", 1, time.Second)},
			want: []view{{Flavor: "a100", Generation: 1}, {Flavor: "h100", Generation: -1,
				Unavailable: "summary invalid: capacity summary of flavor h100 on w: domains[0].free[1]: more than 131072 nodes in the summary's free lists"}},
		},
		"a hostile new generation keeps the last good view and its reservations, unavailable": {
			before: []strata.CapacitySummary{summary(t, "a100", 1, time.Second)},
			worker: Worker{Name: "w"}, connected: true,
			summaries: []strata.CapacitySummary{hostile},
			want: []view{{Flavor: "a100", Generation: 1, Reserved: true,
				Unavailable: "summary invalid: capacity summary of flavor a100 on w: domains[0].free[1]: more than 131072 nodes in the summary's free lists"}},
		},
		"a malformed new generation": {
			before: []strata.CapacitySummary{summary(t, "a100", 1, time.Second)},
			worker: Worker{Name: "w"}, connected: true,
			summaries: []strata.CapacitySummary{malformed},
			want: []view{{Flavor: "a100", Generation: 1, Reserved: true,
				Unavailable: "summary invalid: capacity summary of flavor a100 on w: domains[0].free: 3 numbers, want pairs of a vector position and a node count"}},
		},
		"a good generation after a bad one serves again": {
			before: []strata.CapacitySummary{summary(t, "a100", 1, time.Second), hostile},
			worker: Worker{Name: "w"}, connected: true,
			summaries: []strata.CapacitySummary{summary(t, "a100", 3, time.Second)},
			want:      []view{{Flavor: "a100", Generation: 3, Reserved: true}},
		},
		"unreachable: the targets stay, with their reservations": {
			before: []strata.CapacitySummary{summary(t, "a100", 1, time.Second)},
			worker: Worker{Name: "w", NotConnected: "dial tcp 10.0.0.1:443: i/o timeout"},
			want:   []view{{Flavor: "a100", Generation: 1, Reserved: true, Unavailable: "unreachable: dial tcp 10.0.0.1:443: i/o timeout"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var targets map[string]*placement.Target
			if tc.before != nil {
				targets = refresh(nil, Worker{Name: "w"}, true, tc.before[:1], ObservedAge(now), stale)
				a, err := targets["a100"].Snapshot().FindAssignment(tas.Request{Count: 1, PodRequests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}, tas.DefaultOptions())
				if err != nil {
					t.Fatal(err)
				}
				if err := targets["a100"].Reserve("job", []*tas.Assignment{a}, []corev1.ResourceList{{corev1.ResourceCPU: resource.MustParse("1")}}); err != nil {
					t.Fatal(err)
				}
			}
			for _, s := range tc.before[min(1, len(tc.before)):] {
				targets = refresh(targets, Worker{Name: "w"}, true, []strata.CapacitySummary{s}, ObservedAge(now), stale)
			}
			got := refresh(targets, tc.worker, tc.connected, tc.summaries, ObservedAge(now), stale)
			if diff := cmp.Diff(tc.want, views(got)); diff != "" {
				t.Errorf("targets (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestHints: a dispatch's placement is kept for its copy until the copy is
// created or the dispatch released.
func TestHints(t *testing.T) {
	f := New(nil, "hub")
	a := []*tas.Assignment{{Levels: []string{"rack"}, Domains: []tas.DomainAssignment{{Values: []string{"r1"}, Count: 2}}}}
	f.SetHint("uid/1", a)
	f.SetHint("uid/2", a)
	if diff := cmp.Diff(a, f.Hint("uid/1")); diff != "" {
		t.Errorf("Hint() (-want,+got):\n%s", diff)
	}
	f.SetHint("uid/3", a)
	f.SetHint("uid/4", a)
	f.ForgetHint("uid/1")
	f.Release("w1", "gpu", "uid/2")
	f.PruneHints(func(key string) bool { return key == "uid/4" })
	if diff := cmp.Diff(map[string][]*tas.Assignment{"uid/4": a}, f.hints); diff != "" {
		t.Errorf("hints after ForgetHint, Release and PruneHints (-want,+got):\n%s", diff)
	}
}

// TestOwnDispatches: a summary ends a reservation only for a dispatch
// whose copy the hub sees on that worker.
func TestOwnDispatches(t *testing.T) {
	cpu := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	for name, tc := range map[string]struct {
		copies       []jobs.Job
		wantReserved bool
	}{
		"no copy of the dispatch on the worker: the reservation holds": {wantReserved: true},
		"a copy of another dispatch generation: the reservation holds": {
			copies:       []jobs.Job{batchjob.Adapt(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{strata.HubWorkloadUIDLabel: "uid", strata.DispatchGenerationLabel: "1"}}})},
			wantReserved: true,
		},
		"the worker's own copy: the summary counts it": {
			copies: []jobs.Job{jobset.Adapt(&jobsetapi.JobSet{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{strata.HubWorkloadUIDLabel: "uid", strata.DispatchGenerationLabel: "2"}}})},
		},
	} {
		t.Run(name, func(t *testing.T) {
			targets := refresh(nil, Worker{Name: "w"}, true, []strata.CapacitySummary{summary(t, "a100", 1, time.Second)}, ObservedAge(now), time.Minute)
			a, err := targets["a100"].Snapshot().FindAssignment(tas.Request{Count: 1, PodRequests: cpu}, tas.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			if err := targets["a100"].Reserve("uid/2", []*tas.Assignment{a}, []corev1.ResourceList{cpu}); err != nil {
				t.Fatal(err)
			}
			next := summary(t, "a100", 2, time.Second)
			next.Status.Dispatches = []string{"uid/2", "other/1"}
			summaries := ownDispatches([]strata.CapacitySummary{next}, copyKeys(tc.copies))
			targets = refresh(targets, Worker{Name: "w"}, true, summaries, ObservedAge(now), time.Minute)
			if got := targets["a100"].TakesCapacity("uid/2"); got != tc.wantReserved {
				t.Errorf("Reserved() = %v, want %v", got, tc.wantReserved)
			}
			if diff := cmp.Diff([]string{"uid/2", "other/1"}, next.Status.Dispatches); diff != "" {
				t.Errorf("the summary read was changed (-want,+got):\n%s", diff)
			}
		})
	}
}
