package dispatch

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/jobs/batchjob"
	"strata.dev/strata/pkg/jobs/jobset"
	"strata.dev/strata/pkg/placement"
	"strata.dev/strata/pkg/tas"
)

// target is a flavor on a worker: one node of 8 CPUs.
func target(t *testing.T, cluster, flavor string) *placement.Target {
	t.Helper()
	return targetWith(t, cluster, flavor, nil)
}

// targetWith is target with its summary edited (when edit is not nil).
func targetWith(t *testing.T, cluster, flavor string, edit func(*strata.CapacitySummaryStatus)) *placement.Target {
	t.Helper()
	s := tas.NewSnapshot([]string{"rack", strata.HostnameLabel}, nil)
	s.SetNode(tas.Node{Name: "n", Ready: true, Labels: map[string]string{"rack": "r", strata.HostnameLabel: "n"},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110")}})
	st, err := s.Summarize(math.MaxInt)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&st)
	}
	tg, err := placement.NewTarget(cluster, flavor, &st)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// names are the targets' cluster/flavor.
func names(ts []*placement.Target) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Cluster+"/"+t.Flavor)
	}
	return out
}

func TestEligibleTargets(t *testing.T) {
	targets := []*placement.Target{target(t, "w1", "gpu"), target(t, "w1", "cpu"), target(t, "w2", "gpu"), target(t, "w3", "gpu")}
	clusterLabels := map[string]labels.Set{"w1": {"region": "eu"}, "w2": {"region": "eu"}, "w3": {"region": "us"}}
	cases := map[string]struct {
		selector     labels.Selector
		backoffs     map[string]time.Time
		want         []string
		wantExcluded []string
		wantRetry    time.Duration
	}{
		"every worker": {
			selector: labels.Everything(),
			want:     []string{"w1/gpu", "w1/cpu", "w2/gpu", "w3/gpu"},
		},
		"the queue's clusterSelector": {
			selector: labels.SelectorFromSet(labels.Set{"region": "eu"}),
			want:     []string{"w1/gpu", "w1/cpu", "w2/gpu"},
		},
		"workers in backoff are left out, named for the queue's flavors, the first end is the retry": {
			selector: labels.SelectorFromSet(labels.Set{"region": "eu"}),
			backoffs: map[string]time.Time{"w1": t0.Add(2 * time.Minute), "w3": t0.Add(time.Minute)},
			want:     []string{"w2/gpu"},
			wantExcluded: []string{
				`w1/gpu: refused this workload (LocalQueue "q" does not exist in namespace "ml"); not again before 2026-11-23T12:02:00Z`,
			},
			wantRetry: 2 * time.Minute,
		},
	}
	refusals := map[string]string{"w1": `LocalQueue "q" does not exist in namespace "ml"`}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, excluded, retry := eligibleTargets(targets, tc.selector, clusterLabels, tc.backoffs, []string{"gpu"}, t0,
				func(c string) string { return refusals[c] })
			if diff := cmp.Diff(tc.want, names(got)); diff != "" {
				t.Errorf("eligible (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantExcluded, excluded, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("excluded (-want,+got):\n%s", diff)
			}
			if retry != tc.wantRetry {
				t.Errorf("retry = %s, want %s", retry, tc.wantRetry)
			}
		})
	}
}

func TestAdmittingQueues(t *testing.T) {
	// Not in name order: the message names them in name order.
	targets := []*placement.Target{target(t, "w3", "gpu"), target(t, "w1", "gpu"), target(t, "w1", "cpu"), target(t, "w2", "gpu"), target(t, "w4", "gpu")}
	cases := map[string]struct {
		refusals     map[string]string
		want         []string
		wantExcluded []string
	}{
		"every worker takes it, or the hub does not know": {
			want: []string{"w3/gpu", "w1/gpu", "w1/cpu", "w2/gpu", "w4/gpu"},
		},
		"workers refusing for one reason are named together, the queue's flavors only": {
			refusals: map[string]string{
				"w1": "namespace ml does not exist there",
				"w2": `LocalQueue "q" does not exist in namespace "ml"`,
				"w3": "namespace ml does not exist there",
			},
			want: []string{"w4/gpu"},
			wantExcluded: []string{
				"earlier: kept",
				"w1/gpu, w3/gpu: namespace ml does not exist there",
				`w2/gpu: LocalQueue "q" does not exist in namespace "ml"`,
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, excluded := admittingQueues(targets, []string{"earlier: kept"}, []string{"gpu"}, func(c string) string { return tc.refusals[c] })
			if diff := cmp.Diff(tc.want, names(got)); diff != "" {
				t.Errorf("eligible (-want,+got):\n%s", diff)
			}
			want := tc.wantExcluded
			if want == nil {
				want = []string{"earlier: kept"}
			}
			if diff := cmp.Diff(want, excluded); diff != "" {
				t.Errorf("excluded (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestDispatchTime: dispatches decided in one pass (one clock reading)
// get increasing times, in the microseconds the API keeps; a later clock
// reading is taken as it is.
func TestDispatchTime(t *testing.T) {
	d := &Dispatcher{}
	now := time.Date(2026, time.November, 24, 9, 0, 0, 999, time.UTC)
	var got []time.Time
	for range 3 {
		got = append(got, d.dispatchTime(now))
	}
	later := now.Add(time.Second)
	got = append(got, d.dispatchTime(later), d.dispatchTime(now))
	at := now.Truncate(time.Microsecond)
	want := []time.Time{at, at.Add(time.Microsecond), at.Add(2 * time.Microsecond), later.Truncate(time.Microsecond), later.Truncate(time.Microsecond).Add(time.Microsecond)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("dispatch times (-want,+got):\n%s", diff)
	}
}

// TestServingKind: a JobSet goes only to workers that serve JobSets; the
// others of the queue's flavors say why they are left out. Jobs go
// everywhere.
func TestServingKind(t *testing.T) {
	targets := []*placement.Target{target(t, "w1", "gpu"), target(t, "w2", "gpu"), target(t, "w2", "cpu"), target(t, "w3", "gpu")}
	serves := func(cluster string, k jobs.Kind) (bool, bool) {
		if k == batchjob.Kind {
			return true, true
		}
		switch cluster {
		case "w1":
			return true, true
		case "w2":
			return false, true
		}
		return false, false
	}
	cases := map[string]struct {
		kind         jobs.Kind
		want         []string
		wantExcluded []string
	}{
		"Jobs: every worker": {kind: batchjob.Kind, want: []string{"w1/gpu", "w2/gpu", "w2/cpu", "w3/gpu"}},
		"JobSets: only where served, the others named for the queue's flavors": {
			kind: jobset.Kind,
			want: []string{"w1/gpu"},
			wantExcluded: []string{
				"w2/gpu: the worker does not serve jobsets.jobset.x-k8s.io (install its CRD there)",
				"w3/gpu: not known yet whether the worker serves jobsets.jobset.x-k8s.io",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, excluded := servingKind(targets, nil, tc.kind, []string{"gpu"}, serves)
			if diff := cmp.Diff(tc.want, names(got)); diff != "" {
				t.Errorf("targets (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantExcluded, excluded, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("excluded (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestPassGap(t *testing.T) {
	cases := map[time.Duration]time.Duration{
		0:                      0,
		5 * time.Millisecond:   0,
		19 * time.Millisecond:  0,
		20 * time.Millisecond:  20 * time.Millisecond,
		150 * time.Millisecond: 150 * time.Millisecond,
		3 * time.Second:        time.Second,
	}
	for took, want := range cases {
		if got := passGap(took); got != want {
			t.Errorf("passGap(%v) = %v, want %v", took, got, want)
		}
	}
}

func TestPlaceReason(t *testing.T) {
	w2 := "w2/gpu: refused this workload (queue stopped); not again before 2026-11-23T12:02:00Z"
	w3 := "w3/gpu: does not serve batch/v1 Jobs"
	cases := map[string]struct {
		policy     string
		candidates int
		excluded   []string
		notes      []string
		want       string
	}{
		"the policy's reason alone": {
			policy: "fits on w1/gpu", candidates: 1,
			want: "fits on w1/gpu",
		},
		"workers left out follow the policy's reason, in name order": {
			policy: "fits on w1/gpu", candidates: 1, excluded: []string{w3, w2},
			want: "fits on w1/gpu; " + w2 + "; " + w3,
		},
		"the same workers in the other order say the same": {
			policy: "fits on w1/gpu", candidates: 1, excluded: []string{w2, w3},
			want: "fits on w1/gpu; " + w2 + "; " + w3,
		},
		"no candidate: why the workers were left out, not the policy's reason": {
			policy: "no worker offers flavor gpu", excluded: []string{w3, w2},
			want: "no worker may take it now: " + w2 + "; " + w3,
		},
		"no candidate and none left out: the policy's reason": {
			policy: "no worker offers flavor gpu",
			want:   "no worker offers flavor gpu",
		},
		"notes come last, in their order": {
			policy: "fits on w1/gpu", candidates: 1, excluded: []string{w3},
			notes: []string{"flavor cpu: no level rack", "flavor arm: no level block"},
			want:  "fits on w1/gpu; " + w3 + "; flavor cpu: no level rack; flavor arm: no level block",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			excluded := slices.Clone(tc.excluded)
			got := placeReason(tc.policy, tc.candidates, excluded, tc.notes)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("placeReason (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.excluded, excluded); diff != "" {
				t.Errorf("placeReason changed its argument (-want,+got):\n%s", diff)
			}
		})
	}
}
