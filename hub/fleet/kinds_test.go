package fleet

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"
	testingclock "k8s.io/utils/clock/testing"

	"strata.dev/strata/pkg/jobs/jobset"
	"strata.dev/strata/pkg/jobs/lws"
	"strata.dev/strata/pkg/jobs/mpijob"
)

// TestCopiesPending: a worker's new summaries wait while its copies of a
// kind are read for the first time, for kindSyncWait at most.
func TestCopiesPending(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(t0)
	f := New(nil, "hub")
	f.SetClock(clk)
	r := &remote{connectedAt: t0, kinds: map[schema.GroupVersionKind]*kindWatch{
		jobset.Kind.GroupVersionKind(): {kind: jobset.Kind, started: t0},
		mpijob.Kind.GroupVersionKind(): {kind: mpijob.Kind, started: t0, synced: true},
	}, discovered: map[schema.GroupVersionKind]bool{}}
	f.remotes["w"] = r
	if diff := cmp.Diff([]string{"JobSet", "LeaderWorkerSet"}, f.CopiesPending("w")); diff != "" {
		t.Errorf("while the JobSets are read and discovery has not answered for LeaderWorkerSets (-want,+got):\n%s", diff)
	}
	r.discovered[lws.SetKind.GroupVersionKind()] = false
	if diff := cmp.Diff([]string{"JobSet"}, f.CopiesPending("w")); diff != "" {
		t.Errorf("LeaderWorkerSets not served there (-want,+got):\n%s", diff)
	}
	if got := f.CopiesPending("other"); got != nil {
		t.Errorf("a worker not connected: %v", got)
	}
	clk.Step(kindSyncWait)
	if got := f.CopiesPending("w"); got != nil {
		t.Errorf("after kindSyncWait: %v, want nothing pending", got)
	}
}
