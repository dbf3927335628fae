package dispatch

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/config"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/jobs/batchjob"
	"strata.dev/strata/pkg/jobs/jobset"
	"strata.dev/strata/pkg/testutil"
)

// TestIndex: the dispatcher's index follows its informers' events — a
// Workload that finishes or is deleted (also as a tombstone) leaves it; a
// job is found by its UID (the Workload's owner), with its suspension; a
// kind no informer feeds is not known — and every event asks for a pass.
func TestIndex(t *testing.T) {
	cfg := &configv1beta1.HubConfiguration{}
	config.SetHubDefaults(cfg)
	d := New(nil, nil, cfg, nil, clock.RealClock{})
	wls := d.WorkloadEvents()
	jobsEvents := d.JobEvents(batchjob.Kind)
	workload := func(uid string, finished bool) *strata.Workload {
		wl := &strata.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: uid, UID: types.UID(uid)}}
		if finished {
			wl.Status.Conditions = []metav1.Condition{{Type: strata.WorkloadFinished, Status: metav1.ConditionTrue}}
		}
		return wl
	}
	listed := func() []string {
		var out []string
		for _, e := range d.index.list() {
			out = append(out, e.name)
		}
		return out
	}
	woken := func() bool {
		select {
		case <-d.wake:
			return true
		default:
			return false
		}
	}
	for _, step := range []struct {
		name string
		do   func()
		want []string
	}{
		{"added", func() { wls.OnAdd(workload("a", false), true); wls.OnAdd(workload("b", false), true) }, []string{"a", "b"}},
		{"finished", func() { wls.OnUpdate(workload("a", false), workload("a", true)) }, []string{"b"}},
		{"finished when added", func() { wls.OnAdd(workload("c", true), false) }, []string{"b"}},
		{"deleted as a tombstone", func() {
			wls.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ns/b", Obj: workload("b", false)})
		}, nil},
	} {
		step.do()
		got := listed()
		if diff := cmp.Diff(step.want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b }), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: Workloads (-want +got):\n%s", step.name, diff)
		}
		if !woken() {
			t.Errorf("%s: no pass asked for", step.name)
		}
	}

	// Workloads of one shape share its requests: one copy for a backlog.
	a, b := workload("d", false), workload("e", false)
	for _, wl := range []*strata.Workload{a, b} {
		wl.Spec.PodSets = []strata.PodSet{testutil.MakePodSet("main", 4, "cpu", "2").Obj()}
		wls.OnAdd(wl, false)
	}
	d.index.mu.Lock()
	ea, eb := d.index.workloads["d"], d.index.workloads["e"]
	d.index.mu.Unlock()
	if reflect.ValueOf(ea.need).Pointer() != reflect.ValueOf(eb.need).Pointer() || ea.needKey != "cpu=8;pods=4;" && ea.needKey != "cpu=8;" {
		t.Errorf("two Workloads of one shape: requests %v (%s) and %v, want one shared copy", ea.need, ea.needKey, eb.need)
	}

	job := func(uid string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "j", UID: types.UID(uid)}, Spec: batchv1.JobSpec{Suspend: ptr.To(true)}}
	}
	owned := func(uid string, k jobs.Kind) *entry {
		return &entry{owner: types.UID(uid), kind: k}
	}
	jobsEvents.OnAdd(job("1"), true)
	if je, known := d.index.job(owned("1", batchjob.Kind)); !known || je == nil || je.job.Object().GetUID() != "1" {
		t.Errorf("job added: got %+v, known %v; want it", je, known)
	}
	// A Job made again under the same name: the Workload of the first
	// does not find the second.
	j2 := job("2")
	jobsEvents.OnAdd(j2, false)
	jobsEvents.OnDelete(job("1"))
	if je, _ := d.index.job(owned("1", batchjob.Kind)); je != nil {
		t.Errorf("job deleted: got %+v", je)
	}
	if je, _ := d.index.job(owned("2", batchjob.Kind)); je == nil || je.job.Object().GetUID() != "2" {
		t.Errorf("job made again: got %+v, want it", je)
	}
	jobsEvents.OnDelete(toolscache.DeletedFinalStateUnknown{Obj: j2})
	if je, known := d.index.job(owned("2", batchjob.Kind)); !known || je != nil {
		t.Errorf("job deleted as a tombstone: got %+v, known %v", je, known)
	}
	if _, known := d.index.job(owned("3", jobset.Kind)); known {
		t.Error("a kind no informer feeds is known")
	}
}
