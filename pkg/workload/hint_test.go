package workload

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
)

// TestPlaceFollowsTheHint: a copy whose hub reserved rack r2 is placed
// there while r2 has room, though the engine alone takes the tighter r1;
// without room in r2, or with a hint that does not parse, the engine
// decides.
func TestPlaceFollowsTheHint(t *testing.T) {
	const rack, host = "rack", strata.HostnameLabel
	cluster := func() *tas.Snapshot {
		s := tas.NewSnapshot([]string{rack, host}, nil)
		for _, n := range []struct{ name, rack, cpu string }{{"n1", "r1", "4"}, {"n2", "r2", "8"}} {
			s.SetNode(tas.Node{Name: n.name, Ready: true, Labels: map[string]string{rack: n.rack, host: n.name},
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(n.cpu), corev1.ResourcePods: resource.MustParse("110")}})
		}
		return s
	}
	copyOf := func(pods int32, hint string) *strata.Workload {
		wl := testutil.MakeWorkload("w", "ns").PodSets(testutil.MakePodSet("main", pods, "cpu", "1").Preferred(rack).Obj()).Obj()
		if hint != "" {
			metav1.SetMetaDataAnnotation(&wl.ObjectMeta, strata.TopologyHintAnnotation, hint)
		}
		return wl
	}
	onRack := func(r string, pods int32) string {
		data, err := EncodeTopologyHints([]strata.PodSet{{Name: "main"}},
			[]*tas.Assignment{{Levels: []string{rack}, Domains: []tas.DomainAssignment{{Values: []string{r}, Count: pods}}}})
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	hosts := func(name string, pods int32) []*tas.Assignment {
		return []*tas.Assignment{{Levels: []string{host}, Domains: []tas.DomainAssignment{{Values: []string{name}, Count: pods}}}}
	}
	cases := map[string]struct {
		wl   *strata.Workload
		want []*tas.Assignment
	}{
		"no hint: the tightest rack":         {copyOf(3, ""), hosts("n1", 3)},
		"the hinted rack":                    {copyOf(3, onRack("r2", 3)), hosts("n2", 3)},
		"the hinted rack is the tightest":    {copyOf(3, onRack("r1", 3)), hosts("n1", 3)},
		"a hint for another count":           {copyOf(3, onRack("r2", 2)), hosts("n1", 3)},
		"a hint that does not parse":         {copyOf(3, "{r2"), hosts("n1", 3)},
		"a hinted rack without room for all": {copyOf(6, onRack("r1", 6)), hosts("n2", 6)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, _, err := Place(cluster(), "topo", nil, tc.wl, tas.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Place() (-want,+got):\n%s", diff)
			}
		})
	}
}
