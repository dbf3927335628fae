package dispatch

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/fleet"
	"strata.dev/strata/pkg/placement"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/testutil"
)

// quotaFleet is a fleet whose worker w1 has the given ClusterQueues, the
// copies landing in "train"; other workers' queues are not read.
type quotaFleet struct {
	targetSource
	cqs   []*strata.ClusterQueue
	usage map[string]corev1.ResourceList // queue → usage of flavor gpu
	reads int
}

func (f *quotaFleet) LandingQueue(worker string, _ fleet.QueueTarget) (*strata.ClusterQueue, bool) {
	if worker != "w1" {
		return nil, false
	}
	for _, cq := range f.cqs {
		if cq.Name == "train" {
			return cq, true
		}
	}
	return nil, false
}

func (f *quotaFleet) WorkerBooks(worker string) (*queue.Books, bool) {
	if worker != "w1" {
		return nil, false
	}
	f.reads++
	b := queue.NewBooks(f.cqs)
	for q, u := range f.usage {
		b.Charge(q, "gpu", u, 1)
	}
	return b, true
}

// TestWorkerQuotaShort: the hub keeps no copy from a worker whose queue
// has room for it, says why when it has none, counts what a preemption
// gives back, and charges its own dispatches in the pass.
func TestWorkerQuotaShort(t *testing.T) {
	cpus := func(n string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(n)}
	}
	train := testutil.MakeClusterQueue("train").Cohort("teams").ResourceGroup("cpu").GroupFlavor("gpu", "4").Obj()
	lender := testutil.MakeClusterQueue("lender").Cohort("teams").ResourceGroup("cpu").GroupFlavor("gpu", "2").Obj()
	alone := testutil.MakeClusterQueue("train").ResourceGroup("cpu").GroupFlavor("gpu", "4").Obj()
	cases := map[string]struct {
		cqs     []*strata.ClusterQueue
		usage   map[string]corev1.ResourceList
		cluster string
		freed   corev1.ResourceList
		want    string
	}{
		"room left": {
			cqs: []*strata.ClusterQueue{alone}, usage: map[string]corev1.ResourceList{"train": cpus("2")}, cluster: "w1",
		},
		"the hub does not read the worker's queues": {
			cqs: []*strata.ClusterQueue{alone}, usage: map[string]corev1.ResourceList{"train": cpus("4")}, cluster: "w2",
		},
		"no room left": {
			cqs: []*strata.ClusterQueue{alone}, usage: map[string]corev1.ResourceList{"train": cpus("3")}, cluster: "w1",
			want: "ClusterQueue train there has no room for it: quota: cpu needs 2, more than is left of the quota of 4",
		},
		"a preemption gives room back": {
			cqs: []*strata.ClusterQueue{alone}, usage: map[string]corev1.ResourceList{"train": cpus("4")}, cluster: "w1", freed: cpus("2"),
		},
		"the cohort lends what its peer does not use": {
			cqs: []*strata.ClusterQueue{train, lender}, usage: map[string]corev1.ResourceList{"train": cpus("4")}, cluster: "w1",
		},
		"nor when the peer uses it": {
			cqs: []*strata.ClusterQueue{train, lender}, usage: map[string]corev1.ResourceList{"train": cpus("4"), "lender": cpus("1")}, cluster: "w1",
			want: "ClusterQueue train there has no room for it: quota: cpu needs 2, more than is left of the nominal quota of 4 and of what cohort teams lends",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := &quotaFleet{cqs: tc.cqs, usage: tc.usage}
			d := &Dispatcher{fleet: f}
			view := newPassView()
			wl := testutil.MakeWorkload("job", "ns").Queue("lq").PodSets(testutil.MakePodSet("main", 1, "cpu", "2").Obj()).Obj()
			p := pending{entry: &entry{wl: wl, need: queue.WorkloadRequests(wl)}}
			got, _ := d.workerQuotaShort(view, target(t, tc.cluster, "gpu"), p, freedBy("train", tc.freed), false)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("workerQuotaShort (-want,+got):\n%s", diff)
			}
			if tc.freed != nil {
				// What a preemption would give back is not kept.
				if again, _ := d.workerQuotaShort(view, target(t, tc.cluster, "gpu"), p, nil, false); again == "" {
					t.Errorf("the freed quota stayed in the pass's books")
				}
			}
		})
	}
	t.Run("a dispatch in the pass takes the room", func(t *testing.T) {
		f := &quotaFleet{cqs: []*strata.ClusterQueue{alone}, usage: map[string]corev1.ResourceList{"train": cpus("2")}}
		d := &Dispatcher{fleet: f}
		view := newPassView()
		wl := testutil.MakeWorkload("job", "ns").Queue("lq").PodSets(testutil.MakePodSet("main", 1, "cpu", "2").Obj()).Obj()
		p := pending{entry: &entry{wl: wl, need: queue.WorkloadRequests(wl)}}
		tg := target(t, "w1", "gpu")
		if got, _ := d.workerQuotaShort(view, tg, p, nil, false); got != "" {
			t.Fatalf("first: %q, want room", got)
		}
		d.chargeWorker(view, "w1", "gpu", p, nil)
		if got, _ := d.workerQuotaShort(view, tg, p, nil, false); got == "" {
			t.Errorf("after a dispatch of 2 of the 2 CPUs left: room, want none")
		}
		if f.reads != 1 {
			t.Errorf("the worker's queues were read %d times in a pass, want once", f.reads)
		}
	})
	t.Run("a dispatch whose copy the worker has not admitted yet takes the room", func(t *testing.T) {
		f := &quotaFleet{cqs: []*strata.ClusterQueue{alone}, usage: map[string]corev1.ResourceList{"train": cpus("2")}}
		d := &Dispatcher{fleet: f}
		wl := testutil.MakeWorkload("job", "ns").Queue("lq").PodSets(testutil.MakePodSet("main", 1, "cpu", "2").Obj()).Obj()
		p := pending{entry: &entry{wl: wl, need: queue.WorkloadRequests(wl)}}
		for _, counted := range []bool{false, true} {
			earlier, key := earlierDispatch(false)
			shown := targetWith(t, "w1", "gpu", func(st *strata.CapacitySummaryStatus) {
				if counted {
					st.Dispatches = []string{key}
				}
			})
			view := newPassView()
			view.placed, view.targets = []*strata.Workload{earlier}, []*placement.Target{shown}
			got, _ := d.workerQuotaShort(view, shown, p, nil, false)
			if counted && got != "" {
				t.Errorf("a dispatch the summary counts (the queue's status has it) was charged again: %q", got)
			}
			if !counted && got == "" {
				t.Errorf("a dispatch the summary does not count yet took none of the room")
			}
		}
	})
}

// TestWorkerBooksFromTheSummary: where a summary lists its queues' usage
// (status.queues), the books take it in place of the queues' status,
// which is written apart from the summary: each dispatch is counted
// exactly once, in the summary's usage once it lists the dispatch, in
// flight before, a copy marked to preempt too.
func TestWorkerBooksFromTheSummary(t *testing.T) {
	cpus := func(n string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(n)}
	}
	alone := testutil.MakeClusterQueue("train").ResourceGroup("cpu").GroupFlavor("gpu", "4").Obj()
	cases := map[string]struct {
		status  string // what the queue's status says train holds
		summary string // what the summary says ("" : it says nothing)
		counted bool   // the summary counts the earlier dispatch of 2
		marked  bool   // the earlier dispatch is marked to preempt
		room    bool
	}{
		"the status misses a dispatch the summary counts":        {status: "0", summary: "2", counted: true, room: true},
		"the summary's usage decides, not the status's":          {status: "2", summary: "4", counted: true},
		"the status still holds what is gone":                    {status: "4", summary: "0", room: true},
		"the summary does not count the dispatch yet: in flight": {status: "0", summary: "2"},
		"a copy marked to preempt, not counted yet, is charged":  {status: "0", summary: "2", marked: true},
		"without the summary's queues, the status":               {status: "2", counted: true, room: true},
		"without them, a marked copy's hold is in the status":    {status: "2", marked: true, room: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := &quotaFleet{cqs: []*strata.ClusterQueue{alone}, usage: map[string]corev1.ResourceList{"train": cpus(tc.status)}}
			d := &Dispatcher{fleet: f}
			wl := testutil.MakeWorkload("job", "ns").Queue("lq").PodSets(testutil.MakePodSet("main", 1, "cpu", "2").Obj()).Obj()
			p := pending{entry: &entry{wl: wl, need: queue.WorkloadRequests(wl)}}
			earlier, key := earlierDispatch(tc.marked)
			tg := targetWith(t, "w1", "gpu", func(st *strata.CapacitySummaryStatus) {
				if tc.counted {
					st.Dispatches = []string{key}
				}
				if tc.summary != "" {
					st.Queues = []strata.QueueUsage{{Name: "train", Usage: cpus(tc.summary)}}
				}
			})
			view := newPassView()
			view.placed, view.targets = []*strata.Workload{earlier}, []*placement.Target{tg}
			got, _ := d.workerQuotaShort(view, tg, p, nil, false)
			if (got == "") != tc.room {
				t.Errorf("room: %v (%q), want %v", got == "", got, tc.room)
			}
		})
	}
}

// freedBy is what one queue gives back (nil when nothing).
func freedBy(q string, r corev1.ResourceList) map[string]corev1.ResourceList {
	if r == nil {
		return nil
	}
	return map[string]corev1.ResourceList{q: r}
}

// earlierDispatch is a hub Workload of 2 CPUs dispatched to w1's flavor
// gpu (marked to preempt when marked), and its dispatch key.
func earlierDispatch(marked bool) (*strata.Workload, string) {
	earlier := testutil.MakeWorkload("earlier", "ns").Queue("lq").PodSets(testutil.MakePodSet("main", 1, "cpu", "2").Obj()).Obj()
	earlier.UID = "uid-earlier"
	gen := RecordDispatch(&earlier.Status, "w1", "gpu", "fits", time.Now())
	if marked {
		earlier.Status.Placement.PreemptUpTo = ptr.To[int32](0)
	}
	return earlier, Key(earlier.UID, gen)
}
