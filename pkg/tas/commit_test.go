package tas

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCommitAndRelease(t *testing.T) {
	for name, levels := range map[string][]string{
		"host lowest": {rack, host},
		"rack lowest": {block, rack},
	} {
		t.Run(name, func(t *testing.T) {
			s := snapshotOf(levels, node{"n1", "b1", "r1", "4"}, node{"n2", "b1", "r1", "2"})
			req := Request{Count: 5, PodRequests: cpu("1"), Mode: Required, Level: rack}
			a, err := s.FindAssignment(req, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			u, err := s.Commit(a, req.PodRequests)
			if err != nil {
				t.Fatal(err)
			}
			total := int64(0)
			for _, rl := range u {
				total += rl.Cpu().MilliValue()
			}
			if total != 5000 {
				t.Errorf("committed %dm cpu, want 5000m", total)
			}
			if _, err := s.FindAssignment(Request{Count: 2, PodRequests: cpu("1"), Mode: Required, Level: rack}, DefaultOptions()); err == nil {
				t.Error("2 more pods fit after committing 5 of 6")
			}
			s.Release(u)
			again, err := s.FindAssignment(req, DefaultOptions())
			if err != nil {
				t.Fatalf("after Release: %v", err)
			}
			if diff := cmp.Diff(a, again); diff != "" {
				t.Errorf("assignment after Release (-before,+after):\n%s", diff)
			}
		})
	}
}
