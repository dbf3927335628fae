package summarycopy

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	strata "strata.dev/strata/api/v1beta1"
)

func TestName(t *testing.T) {
	long := strings.Repeat("w", 200)
	cases := map[string]struct {
		worker, flavor, want string
	}{
		"worker.flavor": {worker: "w1", flavor: "gpu", want: "w1.gpu"},
		"too long: hashed, and the worker's name kept": {worker: long, flavor: strings.Repeat("f", 60), want: long + ".HASH"},
		"a worker's name with a dot: hashed":           {worker: "a.b", flavor: "c", want: "a.b.HASH"},
		"a flavor's name with a dot":                   {worker: "a", flavor: "b.c", want: "a.b.c"},
		"cut where the worker's name has a dot":        {worker: strings.Repeat("w", 199) + ".x", flavor: "f", want: strings.Repeat("w", 199) + ".HASH"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Name(tc.worker, tc.flavor)
			sum := sha256.Sum256([]byte(tc.worker + "/" + tc.flavor))
			if want := strings.Replace(tc.want, "HASH", hex.EncodeToString(sum[:8]), 1); got != want {
				t.Errorf("Name = %q, want %q", got, tc.want)
			}
			if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
				t.Errorf("Name %q is not a valid name: %v", got, errs)
			}
		})
	}
	if Name(long, "a"+strings.Repeat("f", 59)) == Name(long, "b"+strings.Repeat("f", 59)) {
		t.Error("two long flavors share a copy's name")
	}
	if Name("a.b", "c") == Name("a", "b.c") {
		t.Error("worker a.b's flavor c and worker a's flavor b.c share a copy's name")
	}
}

func TestSelectors(t *testing.T) {
	copyOf := labels.Set{strata.WorkerClusterLabel: "w1"}
	for _, tc := range []struct {
		selector labels.Selector
		set      labels.Set
		want     bool
	}{
		{Published(), labels.Set{}, true},
		{Published(), copyOf, false},
		{Of("w1"), copyOf, true},
		{Of("w2"), copyOf, false},
		{Of("w1"), labels.Set{}, false},
	} {
		if got := tc.selector.Matches(tc.set); got != tc.want {
			t.Errorf("%s matches %v: %t, want %t", tc.selector, tc.set, got, tc.want)
		}
	}
}

func TestStatus(t *testing.T) {
	summary := &strata.CapacitySummaryStatus{SummaryGeneration: 4, Levels: []string{"rack", "host"}, LeafLevels: 1,
		Dispatches:  []string{"uid/1"},
		Preemptible: []strata.PreemptibleCapacity{{ClusterQueue: "cq", Priority: 1, Workloads: 1}},
	}
	held := []strata.InFlightDomain{{Values: []string{"r1"}, Workloads: 1, Pods: 2, Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("16")}}}
	got := Status(summary, held)
	want := strata.CapacitySummaryStatus{SummaryGeneration: 4, Levels: []string{"rack", "host"}, LeafLevels: 1, InFlight: held}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Status (-want,+got):\n%s", diff)
	}
	if len(summary.Dispatches) != 1 || len(summary.Preemptible) != 1 {
		t.Error("Status changed the summary it copies")
	}
	if got := Status(summary, []strata.InFlightDomain{}); got.InFlight != nil {
		t.Errorf("no reservations gave inFlight %v, want none", got.InFlight)
	}
}

func TestStale(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: t0.Add(d)} }
	st := func(gen int64, observed *metav1.Time, inFlight ...strata.InFlightDomain) *strata.CapacitySummaryStatus {
		return &strata.CapacitySummaryStatus{SummaryGeneration: gen, ObservedTime: observed, InFlight: inFlight}
	}
	cases := map[string]struct {
		written, want *strata.CapacitySummaryStatus
		stale         bool
	}{
		"the same":                            {written: st(1, at(0)), want: st(1, at(0))},
		"only renewed, a moment later":        {written: st(1, at(0)), want: st(1, at(30*time.Second))},
		"only renewed, HeartbeatEvery later":  {written: st(1, at(0)), want: st(1, at(HeartbeatEvery)), stale: true},
		"a new generation":                    {written: st(1, at(0)), want: st(2, at(time.Second)), stale: true},
		"a reservation in flight":             {written: st(1, at(0)), want: st(1, at(0), strata.InFlightDomain{Values: []string{"r1"}, Workloads: 1, Pods: 1}), stale: true},
		"the reservation counted":             {written: st(1, at(0), strata.InFlightDomain{Values: []string{"r1"}, Workloads: 1, Pods: 1}), want: st(1, at(0)), stale: true},
		"never copied: no time":               {written: st(0, nil), want: st(1, at(0)), stale: true},
		"not observed yet, nor written":       {written: st(0, nil), want: st(0, nil)},
		"the worker's summary lost its time":  {written: st(1, at(0)), want: st(1, nil), stale: true},
		"written without a time, now has one": {written: st(1, nil), want: st(1, at(0)), stale: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Stale(tc.written, tc.want); got != tc.stale {
				t.Errorf("Stale = %t, want %t", got, tc.stale)
			}
		})
	}
}
