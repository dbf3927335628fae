package placement

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
)

// TestDecideProvisional: a workload that fits no target now goes to the
// first target (by the queue's flavor order, then cluster name) whose
// worker queue provisions nodes there and whose topology has the levels
// it names; its pod sets carry no assignment, and its reservation takes
// nothing.
func TestDecideProvisional(t *testing.T) {
	full := func() *strata.CapacitySummaryStatus { return cluster(t, [][][]int64{{rackOf(2, 0)}}) }
	// provisioning says which targets provision, by cluster/flavor.
	cases := map[string]struct {
		targets      func() []*Target
		flavors      []string
		provisioning []string
		workload     *strata.Workload
		want         []Candidate
		reason       string
	}{
		"nothing provisions": {
			targets:  func() []*Target { return []*Target{target(t, "a", "gpu", full()), target(t, "b", "gpu", full())} },
			flavors:  []string{"gpu"},
			workload: job(16, "8", func(p *testutil.PodSetWrapper) { p.Required(rack) }),
		},
		"the one that provisions, though its nodes are full and too few": {
			targets:      func() []*Target { return []*Target{target(t, "a", "gpu", full()), target(t, "b", "gpu", full())} },
			flavors:      []string{"gpu"},
			provisioning: []string{"b/gpu"},
			workload:     job(16, "8", func(p *testutil.PodSetWrapper) { p.Required(rack) }),
			want:         []Candidate{{Cluster: "b", Flavor: "gpu", Fits: true, Reason: "provisions nodes for it (a ProvisioningRequest admission check)"}},
			reason: "b/gpu: its nodes cannot hold it now, and its ClusterQueue there provisions nodes for it (a ProvisioningRequest admission check): " +
				"quota is reserved there at once, the topology assigned on the nodes provisioned",
		},
		"the queue's flavor order, then the cluster's name": {
			targets: func() []*Target {
				return []*Target{target(t, "c", "spot", full()), target(t, "b", "gpu", full()), target(t, "a", "spot", full()), target(t, "a", "other", full())}
			},
			flavors:      []string{"spot", "gpu"},
			provisioning: []string{"c/spot", "b/gpu", "a/spot", "a/other"},
			workload:     job(2, "8", nil),
			want: []Candidate{
				{Cluster: "a", Flavor: "spot", Fits: true, Reason: "provisions nodes for it (a ProvisioningRequest admission check)"},
				{Cluster: "c", Flavor: "spot", Fits: true, Reason: "provisions nodes for it (a ProvisioningRequest admission check)"},
				{Cluster: "b", Flavor: "gpu", Fits: true, Reason: "provisions nodes for it (a ProvisioningRequest admission check)"},
			},
			reason: "a/spot: its nodes cannot hold it now, and its ClusterQueue there provisions nodes for it (a ProvisioningRequest admission check): " +
				"quota is reserved there at once, the topology assigned on the nodes provisioned; " +
				"c/spot: provisions nodes for it (a ProvisioningRequest admission check); b/gpu: provisions nodes for it (a ProvisioningRequest admission check)",
		},
		"not where the topology lacks a level it names": {
			targets: func() []*Target {
				flat := target(t, "a", "gpu", summaryOf(t, []string{host}, []string{"n0"}))
				return []*Target{flat, target(t, "b", "gpu", full())}
			},
			flavors:      []string{"gpu"},
			provisioning: []string{"a/gpu"},
			workload:     job(2, "8", func(p *testutil.PodSetWrapper) { p.Required(rack) }),
			reason: "no cluster that provisions nodes has its topology levels: a/gpu: pod set main: " +
				`podset-required-topology: "cloud.provider.com/topology-rack" is not a level of Topology "of flavor gpu" (levels: kubernetes.io/hostname)`,
		},
		"not where the worker is unavailable": {
			targets: func() []*Target {
				a := target(t, "a", "gpu", full())
				a.Unavailable = "summary stale"
				return []*Target{a}
			},
			flavors:      []string{"gpu"},
			provisioning: []string{"a/gpu"},
			workload:     job(2, "8", nil),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := New(configv1beta1.Compact, tas.Options{}, 0)
			targets := tc.targets()
			d := p.DecideProvisional(tc.workload, tc.flavors, targets, func(tg *Target) bool {
				return slices.Contains(tc.provisioning, tg.Cluster+"/"+tg.Flavor)
			})
			if diff := cmp.Diff(tc.want, d.Candidates); diff != "" {
				t.Errorf("candidates (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.reason, d.Reason); diff != "" {
				t.Errorf("reason (-want,+got):\n%s", diff)
			}
			if len(tc.want) == 0 {
				if d.Cluster != "" || d.Provisional {
					t.Errorf("decided %s/%s, want no decision", d.Cluster, d.Flavor)
				}
				return
			}
			if d.Cluster != tc.want[0].Cluster || d.Flavor != tc.want[0].Flavor || !d.Provisional {
				t.Fatalf("decided %s/%s (provisional %v), want %s/%s provisional", d.Cluster, d.Flavor, d.Provisional, tc.want[0].Cluster, tc.want[0].Flavor)
			}
			for i, a := range d.Assignments() {
				if a != nil {
					t.Errorf("pod set %d has an assignment, want none", i)
				}
			}
			// Its reservation takes nothing there.
			tg := Find(targets, d.Cluster, d.Flavor)
			if err := d.Reserve(targets, "key/1"); err != nil {
				t.Fatal(err)
			}
			if !tg.HasReservation("key/1") {
				t.Error("the target holds no reservation for the dispatch")
			}
			if in := tg.InFlight(); len(in) != 0 {
				t.Errorf("in flight %v, want nothing", in)
			}
		})
	}
}

// TestTargetProvisions: a target says which worker queues provision nodes
// on its flavor as its summary's queues say.
func TestTargetProvisions(t *testing.T) {
	st := cluster(t, [][][]int64{{rackOf(2, 8)}})
	st.Queues = []strata.QueueUsage{{Name: "scaled", Provisions: true}, {Name: "plain", Usage: corev1.ResourceList{}}}
	tg := target(t, "a", "gpu", st)
	for queue, want := range map[string]bool{"scaled": true, "plain": false, "absent": false} {
		if got := tg.Provisions(queue); got != want {
			t.Errorf("Provisions(%s) = %v, want %v", queue, got, want)
		}
	}
}
