package workercluster

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/fleet"
)

func TestFreshness(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	summary := func(flavor string, age time.Duration) strata.CapacitySummary {
		s := strata.CapacitySummary{Spec: strata.CapacitySummarySpec{Flavor: flavor}}
		if age >= 0 {
			s.Status.ObservedTime = &metav1.Time{Time: now.Add(-age)}
		}
		return s
	}
	cases := map[string]struct {
		summaries []strata.CapacitySummary
		want      metav1.Condition
		wantNext  time.Duration
	}{
		"none yet": {
			want: metav1.Condition{Type: "SummariesFresh", Status: "False", Reason: ReasonNoSummaries,
				Message: "the worker publishes no capacity summaries yet: is strata-agent running there?"},
			wantNext: 2 * time.Minute,
		},
		"all fresh: checked again when the oldest turns stale": {
			summaries: []strata.CapacitySummary{summary("a100", 30*time.Second), summary("h100", 90*time.Second)},
			want:      metav1.Condition{Type: "SummariesFresh", Status: "True", Reason: ReasonFresh, Message: "2 summaries observed within 2m0s"},
			wantNext:  31 * time.Second,
		},
		"one stale, one never observed": {
			summaries: []strata.CapacitySummary{summary("h100", 3*time.Minute), summary("a100", 10*time.Second), summary("b200", -1)},
			want: metav1.Condition{Type: "SummariesFresh", Status: "False", Reason: ReasonStale,
				Message: "summaries older than 2m0s: b200 (never observed), h100 (observed 2026-11-23T11:57:00Z); the worker gets no new work on those flavors"},
			wantNext: 110 * time.Second,
		},
		"one summary claims two billion nodes: named, the others counted": {
			summaries: []strata.CapacitySummary{summary("a100", 10*time.Second), func() strata.CapacitySummary {
				s := summary("h100", 10*time.Second)
				s.Status.SummaryGeneration = 7
				s.Status.Levels, s.Status.LeafLevels = []string{"rack"}, 1
				s.Status.Resources, s.Status.Vectors = []corev1.ResourceName{"cpu"}, []strata.ResourceVector{{8000}}
				s.Status.Domains = []strata.SummaryDomain{{Values: []string{"r1"}, Free: []int32{0, 2_000_000_000}}}
				return s
			}()},
			want: metav1.Condition{Type: "SummariesFresh", Status: "False", Reason: ReasonInvalid,
				Message: "summaries the hub cannot read: h100 (generation 7: domains[0].free[1]: more than 131072 nodes in the summary's free lists); the worker gets no new work on those flavors"},
			wantNext: 110 * time.Second,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, next := freshness(tc.summaries, fleet.ObservedAge(now), 2*time.Minute)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("condition (-want,+got):\n%s", diff)
			}
			if next != tc.wantNext {
				t.Errorf("next check in %s, want %s", next, tc.wantNext)
			}
		})
	}
}
