package tas

import (
	"encoding/json"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestSummaryGivesTheAgentsAnswers checks that the hub's engine on a summary
// answers "does it fit, and in which rack" as the agent's engine does.
func TestSummaryGivesTheAgentsAnswers(t *testing.T) {
	var nodes []node
	for b := range 2 {
		for r := range 3 {
			for h := range 4 {
				nodes = append(nodes, node{fmt.Sprintf("b%d-r%d-h%d", b, r, h), fmt.Sprintf("b%d", b), fmt.Sprintf("r%d", r), fmt.Sprint(2 + (b+r+h)%5)})
			}
		}
	}
	agent := snapshotOf([]string{block, rack, host}, nodes...)
	agent.AddUsage("b0-r0-h0", cpu("1"), 1)
	notReady := node{"b1-r2-h3", "b1", "r2", "6"}.engineNode()
	notReady.Ready = false
	agent.SetNode(notReady)

	st, err := agent.Summarize(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if st.Coarsened || st.Nodes != 23 || st.LeafLevels != 2 {
		t.Fatalf("summary: coarsened %v, nodes %d, leaf levels %d; want false, 23, 2", st.Coarsened, st.Nodes, st.LeafLevels)
	}
	hub, err := NewSnapshotFromSummary(&st)
	if err != nil {
		t.Fatal(err)
	}
	for _, shape := range []Request{
		{Count: 10, PodRequests: cpu("1"), Mode: Required, Level: rack},
		{Count: 18, PodRequests: cpu("1"), Mode: Required, Level: rack},
		{Count: 19, PodRequests: cpu("1"), Mode: Required, Level: rack},
		{Count: 6, PodRequests: cpu("2"), Mode: Required, Level: rack},
		{Count: 5, PodRequests: cpu("3"), Mode: Required, Level: block},
		{Count: 40, PodRequests: cpu("1"), Mode: Preferred, Level: rack},
		{Count: 90, PodRequests: cpu("1"), Mode: Unconstrained},
		{Count: 6, PodRequests: cpu("1"), Mode: Required, Level: host},
		{Count: 7, PodRequests: cpu("1"), Mode: Required, Level: host},
		{Count: 12, PodRequests: cpu("1"), Mode: Required, Level: block, Layers: []Layer{{host, 3}}},
	} {
		a, aErr := agent.FindAssignment(shape, DefaultOptions())
		h, hErr := hub.FindAssignment(shape, DefaultOptions())
		if (aErr == nil) != (hErr == nil) {
			t.Errorf("%+v: agent error %v, hub error %v", shape, aErr, hErr)
			continue
		}
		if aErr != nil || shape.Mode != Required || shape.Level == host {
			continue
		}
		if a.PodCount() != h.PodCount() || h.PodCount() != shape.Count {
			t.Errorf("%+v: agent placed %d, hub %d", shape, a.PodCount(), h.PodCount())
		}
	}
}

func TestSummaryStaysInBudget(t *testing.T) {
	s := NewSnapshot([]string{block, rack, host}, nil)
	for i := range 4096 {
		name := fmt.Sprintf("node-%05d", i)
		s.SetNode(Node{
			Name:   name,
			Labels: map[string]string{block: fmt.Sprintf("block-%d", i/256), rack: fmt.Sprintf("rack-%d", i/16%16), host: name},
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewMilliQuantity(int64(8000+i%997), resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewQuantity(int64(1<<36+i*4099), resource.BinarySI),
				corev1.ResourcePods:   resource.MustParse("110"),
			},
			Ready: true,
		})
	}
	exact, err := s.Summarize(64 << 20)
	if err != nil {
		t.Fatal(err)
	}
	const budget = 64 * 1024
	st, err := s.Summarize(budget)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(st)
	if len(data) > budget || !st.Coarsened {
		t.Fatalf("summary is %d bytes (coarsened %v), want at most %d", len(data), st.Coarsened, budget)
	}
	// Never more than exists: every coarse bucket is at most the exact one.
	for r := range st.Resources {
		var coarse, fine int64
		for _, d := range st.Domains {
			for _, b := range d.Buckets {
				coarse += b.Free[r] * int64(b.Nodes)
			}
		}
		for _, d := range exact.Domains {
			for _, b := range d.Buckets {
				fine += b.Free[r] * int64(b.Nodes)
			}
		}
		if coarse > fine {
			t.Errorf("%s: coarse summary reports %d, more than the %d that exists", st.Resources[r], coarse, fine)
		}
	}
}
