package workload

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
)

// TestSpreadAvoid replays the KEP's table (KEP-13746, three domains,
// maxShareAllowingPlacement 34%): each row's domains above the share are
// avoided, and the unit goes to the first domain left, A before B before C.
func TestSpreadAvoid(t *testing.T) {
	rule := strata.TopologySpreadingRule{TopologyKey: "zone", MaxShareAllowingPlacement: resource.MustParse("0.34"), EnforcementMode: strata.SpreadingRequired}
	counts := map[string]int{}
	var placed []string
	for range 6 {
		avoid := SpreadAvoid(rule, counts)
		banned := map[string]bool{}
		for _, a := range avoid {
			banned[a.Values[0]] = true
			if a.Level != "zone" || a.Preferred {
				t.Fatalf("avoid %+v: want a required avoid of level zone", a)
			}
		}
		for _, d := range []string{"A", "B", "C"} {
			if !banned[d] {
				counts[d]++
				placed = append(placed, d)
				break
			}
		}
	}
	if diff := cmp.Diff([]string{"A", "B", "C", "A", "B", "C"}, placed); diff != "" {
		t.Errorf("placements (-want,+got):\n%s", diff)
	}
	if got := SpreadAvoid(rule, map[string]int{}); got != nil {
		t.Errorf("none admitted: avoid %v, want none", got)
	}
	preferred := rule
	preferred.EnforcementMode = strata.SpreadingPreferred
	if got := SpreadAvoid(preferred, map[string]int{"A": 2, "B": 1}); len(got) != 1 || !got[0].Preferred || got[0].Values[0] != "A" {
		t.Errorf("preferred: avoid %+v, want A, preferred", got)
	}
	// The share is checked before the new unit counts, with <=: exactly
	// the share is still allowed.
	half := strata.TopologySpreadingRule{TopologyKey: "zone", MaxShareAllowingPlacement: resource.MustParse("0.5")}
	if got := SpreadAvoid(half, map[string]int{"A": 1, "B": 1}); got != nil {
		t.Errorf("shares at exactly 0.5: avoid %v, want none", got)
	}
}

func TestParseSpreading(t *testing.T) {
	path := field.NewPath("annotations")
	rule := func(key, share, mode string) string {
		return fmt.Sprintf(`{"topologyKey": %q, "maxShareAllowingPlacement": %q, "enforcementMode": %q}`, key, share, mode)
	}
	cases := map[string]struct {
		value    string
		want     *strata.TopologySpreading
		wantErrs []string
	}{
		"Kueue's example: one rule, selectors, the mode defaulted": {
			value: `{"workloadLabelSelectors":[{"key":"app","operator":"In","values":["main"]}],"rules":[{"topologyKey":"topology.kubernetes.io/zone","maxShareAllowingPlacement":"0.45"}]}`,
			want: &strata.TopologySpreading{
				WorkloadLabelSelectors: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "In", Values: []string{"main"}}},
				Rules:                  []strata.TopologySpreadingRule{{TopologyKey: "topology.kubernetes.io/zone", MaxShareAllowingPlacement: resource.MustParse("0.45"), EnforcementMode: "Required"}},
			},
		},
		"two rules": {
			value: `{"rules":[` + rule("zone", "0.45", "Required") + `,` + rule("cloud.com/partition", "0.22", "Preferred") + `]}`,
		},
		"not JSON":                 {value: `not-json`, wantErrs: []string{"must be a JSON object"}},
		"an unknown field":         {value: `{"rules":[{"key":"zone","maxShareAllowingPlacement":"0.5"}]}`, wantErrs: []string{`unknown field "key"`}},
		"no rules":                 {value: `{"rules":[]}`, wantErrs: []string{"must have 1 to 2 rules, has 0"}},
		"three rules":              {value: `{"rules":[` + rule("a", "0.5", "Required") + `,` + rule("b", "0.5", "Required") + `,` + rule("c", "0.5", "Required") + `]}`, wantErrs: []string{"must have 1 to 2 rules, has 3"}},
		"a share of 1":             {value: `{"rules":[` + rule("zone", "1", "Required") + `]}`, wantErrs: []string{"must be greater than 0 and less than 1"}},
		"a share of 0":             {value: `{"rules":[` + rule("zone", "0", "Required") + `]}`, wantErrs: []string{"must be greater than 0 and less than 1"}},
		"an unknown mode":          {value: `{"rules":[` + rule("zone", "0.5", "Sometimes") + `]}`, wantErrs: []string{`"Sometimes" must be Required or Preferred`}},
		"one level twice":          {value: `{"rules":[` + rule("zone", "0.5", "Required") + `,` + rule("zone", "0.3", "Required") + `]}`, wantErrs: []string{`"zone" is already rule 0's`}},
		"a selector that is wrong": {value: `{"workloadLabelSelectors":[{"key":"app","operator":"Near"}],"rules":[` + rule("zone", "0.5", "Required") + `]}`, wantErrs: []string{`operator "Near" of key "app"`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, errs := parseSpreading(tc.value, path)
			if len(errs) != len(tc.wantErrs) {
				t.Fatalf("errors = %v, want %d", errs, len(tc.wantErrs))
			}
			for i, e := range errs {
				if !strings.Contains(e.Error(), tc.wantErrs[i]) {
					t.Errorf("error %d = %q, want it to contain %q", i, e.Error(), tc.wantErrs[i])
				}
			}
			if tc.want != nil {
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("parseSpreading() (-want,+got):\n%s", diff)
				}
			}
		})
	}
}

// TestSpreadingNeedsALevel: like Kueue, the annotation needs a required or
// preferred level to pack each pod set into.
func TestSpreadingNeedsALevel(t *testing.T) {
	value := `{"rules":[{"topologyKey":"zone","maxShareAllowingPlacement":"0.5"}]}`
	_, errs := ParseTopologyRequest(map[string]string{"kueue.x-k8s.io/podset-topology-spreading": value}, 4, 0, field.NewPath("a"))
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "needs podset-required-topology or podset-preferred-topology") {
		t.Errorf("errors = %v, want the missing level", errs)
	}
	req, errs := ParseTopologyRequest(map[string]string{"strata.dev/podset-topology-spreading": value, "strata.dev/podset-required-topology": "rack"}, 4, 0, field.NewPath("a"))
	if len(errs) != 0 || req.TopologySpreading == nil || len(req.TopologySpreading.Rules) != 1 {
		t.Errorf("with a required level: %+v, %v", req, errs)
	}
}

// TestSpreadCounts counts units of matching admitted workloads per domain.
func TestSpreadCounts(t *testing.T) {
	s := tas.NewSnapshot([]string{"zone", strata.HostnameLabel}, nil)
	for _, n := range []struct{ name, zone string }{{"h1", "z1"}, {"h2", "z1"}, {"h3", "z2"}} {
		s.SetNode(tas.Node{Name: n.name, Labels: map[string]string{"zone": n.zone, strata.HostnameLabel: n.name}, Ready: true})
	}
	admitted := func(name string, app string, hosts ...string) *strata.Workload {
		a := &tas.Assignment{Levels: []string{strata.HostnameLabel}}
		for _, h := range hosts {
			a.Domains = append(a.Domains, tas.DomainAssignment{Values: []string{h}, Count: 1})
		}
		wl := &strata.Workload{}
		wl.Name, wl.Namespace, wl.Labels = name, "ns", map[string]string{"app": app}
		wl.Spec.PodSets = []strata.PodSet{{Name: "main", Count: int32(len(hosts))}}
		wl.Status.Admission = &strata.Admission{PodSetAssignments: []strata.PodSetAssignment{{Name: "main", TopologyAssignment: tas.Encode(a)}}}
		return wl
	}
	sp := &strata.TopologySpreading{WorkloadLabelSelectors: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "In", Values: []string{"web"}}}}
	me := &strata.Workload{}
	me.Name, me.Namespace = "me", "ns"
	got := SpreadCounts(s, []*strata.Workload{
		admitted("a", "web", "h1", "h2"), // one unit in z1, whatever its hosts
		admitted("b", "web", "h1", "h3"), // one unit in both zones
		admitted("c", "db", "h3"),        // not selected
	}, me, sp, "zone")
	if diff := cmp.Diff(map[string]int{"z1": 2, "z2": 1}, got); diff != "" {
		t.Errorf("SpreadCounts() (-want,+got):\n%s", diff)
	}
}

func TestFleetSpreadCounts(t *testing.T) {
	plan := func(values ...[]string) map[string]*tas.Assignment {
		a := &tas.Assignment{Levels: []string{"block", "rack"}}
		for _, v := range values {
			a.Domains = append(a.Domains, tas.DomainAssignment{Values: v, Count: 1})
		}
		return map[string]*tas.Assignment{"main": a}
	}
	wl := func(name, app string) *strata.Workload {
		w := &strata.Workload{}
		w.Name, w.Namespace, w.Labels = name, "ns", map[string]string{"app": app}
		w.Spec.PodSets = []strata.PodSet{{Name: "main", Count: 1}}
		return w
	}
	sp := &strata.TopologySpreading{WorkloadLabelSelectors: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "In", Values: []string{"web"}}}}
	me := wl("me", "web")
	dispatched := []Dispatched{
		{Workload: wl("a", "web"), Cluster: "w1", Hints: plan([]string{"b1", "r1"}, []string{"b1", "r2"})}, // one unit in w1's b1
		{Workload: wl("b", "web"), Cluster: "w2", Hints: plan([]string{"b1", "r1"})},                       // the same names, another worker
		{Workload: wl("c", "db"), Cluster: "w2", Hints: plan([]string{"b2", "r1"})},                        // not selected
		{Workload: wl("d", "web"), Cluster: "w3"},                                                          // no plan: tells nothing
		{Workload: wl("e", "web"), Cluster: "w3", Hints: map[string]*tas.Assignment{"main": {Levels: []string{"zone"}, Domains: []tas.DomainAssignment{{Values: []string{"z1"}, Count: 1}}}}},
	}
	got := FleetSpreadCounts(dispatched, me, sp, "block")
	if diff := cmp.Diff(map[string]int{"w1/b1": 1, "w2/b1": 1}, got); diff != "" {
		t.Errorf("FleetSpreadCounts(block) (-want,+got):\n%s", diff)
	}
	got = FleetSpreadCounts(dispatched, me, sp, "rack")
	if diff := cmp.Diff(map[string]int{"w1/b1/r1": 1, "w1/b1/r2": 1, "w2/b1/r1": 1}, got); diff != "" {
		t.Errorf("FleetSpreadCounts(rack) (-want,+got):\n%s", diff)
	}

	rule := strata.TopologySpreadingRule{TopologyKey: "block", MaxShareAllowingPlacement: resource.MustParse("0.34")}
	avoid := FleetSpreadAvoid(rule, map[string]int{"w1/b1": 2, "w2/b1": 1, "w2/b2": 1})
	want := map[string][]tas.Avoid{"w1": {{Level: "block", Values: []string{"b1"}}}}
	if diff := cmp.Diff(want, avoid); diff != "" {
		t.Errorf("FleetSpreadAvoid() (-want,+got):\n%s", diff)
	}
}
