package scheduler

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
)

// TestScheduleResizesElastic: an admitted elastic workload whose pod count
// changes (its Job resized while it runs) has its admission follow in
// place: a scale-up takes quota and capacity for the added pods only, the
// assignment keeping the running pods' domains first; one beyond its
// quota waits, saying so, and admits nothing; a scale-down waits for its
// removed pods to be gone, then gives their quota back, which a pending
// workload then takes in the same pass.
func TestScheduleResizesElastic(t *testing.T) {
	cq := testutil.MakeClusterQueue("a").Flavor("tas-flavor", "cpu", "10").Obj()
	el := testutil.MakeWorkload("el", "ns").Queue("a").PodSets(testutil.MakePodSet("main", 2, "cpu", "1").Unconstrained().Obj()).Obj()
	el.CreationTimestamp = metav1.NewTime(created)
	metav1.SetMetaDataAnnotation(&el.ObjectMeta, strata.ElasticJobAnnotation, "true")
	e := newSchedEnv(t, []client.Object{cq, el}, nil,
		[]*corev1.Node{tasNode("r1-n1", "r1", "4"), tasNode("r1-n2", "r1", "4"), tasNode("r2-n1", "r2", "4")}, interceptor.Funcs{})
	key := types.NamespacedName{Namespace: "ns", Name: "el"}
	get := func() *strata.Workload {
		t.Helper()
		var wl strata.Workload
		if err := e.c.Get(t.Context(), key, &wl); err != nil {
			t.Fatal(err)
		}
		return &wl
	}
	pass := func() {
		t.Helper()
		if err := e.s.Schedule(t.Context()); err != nil {
			t.Fatalf("Schedule(): %v", err)
		}
		e.settle()
		e.informed(t)
	}
	// resizeTo sets the pod count as the intake does for the Job's.
	resizeTo := func(n int32) {
		t.Helper()
		wl := get()
		wl.Spec.PodSets[0].Count = n
		if err := e.c.Update(t.Context(), wl); err != nil {
			t.Fatal(err)
		}
		e.informed(t)
	}
	// admitted is the admission's count, cpu usage and domains (host=pods,
	// in order).
	admitted := func() (int32, string, []string) {
		t.Helper()
		psa := get().Status.Admission.PodSetAssignments[0]
		a, err := tas.Decode(psa.TopologyAssignment)
		if err != nil {
			t.Fatal(err)
		}
		var domains []string
		var sum int32
		for _, d := range a.Domains {
			domains = append(domains, fmt.Sprintf("%s=%d", d.Values[len(d.Values)-1], d.Count))
			sum += d.Count
		}
		if sum != psa.Count {
			t.Errorf("the assignment holds %d pods, the admission %d", sum, psa.Count)
		}
		cpu := psa.ResourceUsage[corev1.ResourceCPU]
		return psa.Count, cpu.String(), domains
	}
	resized := func() *metav1.Condition {
		return meta.FindStatusCondition(get().Status.Conditions, strata.WorkloadResized)
	}

	pass()
	n, cpu, first := admitted()
	if n != 2 || cpu != "2" {
		t.Fatalf("admitted %d pods, %s CPUs; want 2, 2", n, cpu)
	}

	// Up to 6: the first domains stay where they were.
	resizeTo(6)
	pass()
	n, cpu, domains := admitted()
	if n != 6 || cpu != "6" {
		t.Fatalf("after scaling up: %d pods, %s CPUs; want 6, 6 (%v)", n, cpu, domains)
	}
	// The hosts of the first admission come first, each with at least
	// its pods (an added pod on the last of them joins it).
	host := func(d string) string { return d[:len(d)-2] }
	for i, d := range first {
		if i >= len(domains) || host(domains[i]) != host(d) || domains[i] < d {
			t.Errorf("the running pods' domains moved: %v, then %v", first, domains)
			break
		}
	}
	t.Logf("admitted on %v, then %v", first, domains)
	if c := resized(); c == nil || c.Status != metav1.ConditionTrue || c.Message != "scaled up from 2 to 6 pods in place" {
		t.Errorf("Resized = %+v, want True, scaled up from 2 to 6", c)
	}
	if a := get().Status.Admission; meta.FindStatusCondition(get().Status.Conditions, strata.WorkloadAdmitted).Status != metav1.ConditionTrue || a == nil {
		t.Errorf("not admitted after the resize")
	}

	// Up to 12: beyond the queue's 10 CPUs; it waits, and runs as it is.
	resizeTo(12)
	pass()
	if n, _, _ := admitted(); n != 6 {
		t.Errorf("admitted %d pods beyond the quota, want 6", n)
	}
	if c := resized(); c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonResizePending {
		t.Errorf("Resized = %+v, want False, Pending", c)
	}

	// Down to 3, three of its pods still running beyond it: it waits for
	// them to go.
	resizeTo(3)
	var pods []*corev1.Pod
	for i := range 4 {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("el-%d", i), Namespace: "ns",
			Labels: map[string]string{strata.WorkloadLabel: "el", strata.PodSetLabel: "main"}}}
		if err := e.c.Create(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, p)
	}
	pass()
	if n, _, _ := admitted(); n != 6 {
		t.Errorf("scaled down to %d while its removed pods run, want 6 still", n)
	}
	if c := resized(); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("Resized = %+v, want False while its pods go", c)
	}
	// They go; a workload of 6 CPUs waits for the queue's quota.
	if err := e.c.Delete(t.Context(), pods[3]); err != nil {
		t.Fatal(err)
	}
	other := testutil.MakeWorkload("other", "ns").Queue("a").PodSets(testutil.MakePodSet("main", 6, "cpu", "1").Unconstrained().Obj()).Obj()
	other.CreationTimestamp = metav1.NewTime(created)
	if err := e.c.Create(t.Context(), other); err != nil {
		t.Fatal(err)
	}
	e.informed(t)
	pass()
	n, cpu, _ = admitted()
	if n != 3 || cpu != "3" {
		t.Errorf("after scaling down: %d pods, %s CPUs; want 3, 3", n, cpu)
	}
	if c := resized(); c == nil || c.Status != metav1.ConditionTrue || c.Message != "scaled down from 6 to 3 pods in place" {
		t.Errorf("Resized = %+v, want True, scaled down from 6 to 3", c)
	}
	got := withoutMessages(e.outcomes(t), nil)
	if diff := cmp.Diff(outcome{Reason: ReasonAdmitted, Flavor: "tas-flavor"}, got["other"]); diff != "" {
		t.Errorf("the workload the freed quota holds (-want,+got):\n%s", diff)
	}
}

// TestScheduleResizePreempts: a scale-up beyond its queue's quota
// preempts, as Kueue's workload slice does, the lower-priority workloads
// the queue's policy lets it, never its own running pods; the quota they
// free is held for it until their pods are gone, and then the pods added
// are admitted in place.
func TestScheduleResizePreempts(t *testing.T) {
	// restart: the agent restarts while the victim's pods terminate; the
	// preemption is rebuilt from the conditions (restorePreemptions).
	for name, restart := range map[string]bool{"in one process": false, "across a restart": true} {
		t.Run(name, func(t *testing.T) { testScheduleResizePreempts(t, restart) })
	}
}

func testScheduleResizePreempts(t *testing.T, restart bool) {
	// The queue's quota and the node hold el, low and mid: el's 2 pods
	// added need one of them gone, low (the lowest priority); mid, of a
	// priority below el's too, stays.
	cq := testutil.MakeClusterQueue("a").Flavor("tas-flavor", "cpu", "6").
		Preemption(strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}).Obj()
	el := testutil.MakeWorkload("el", "ns").Queue("a").PodSets(testutil.MakePodSet("main", 2, "cpu", "1").Unconstrained().Obj()).Obj()
	el.CreationTimestamp = metav1.NewTime(created)
	el.Spec.Priority = ptr.To[int32](10)
	metav1.SetMetaDataAnnotation(&el.ObjectMeta, strata.ElasticJobAnnotation, "true")
	low := testutil.MakeWorkload("low", "ns").Queue("a").PodSets(testutil.MakePodSet("main", 2, "cpu", "1").Unconstrained().Obj()).Obj()
	low.CreationTimestamp = metav1.NewTime(created.Add(time.Second))
	low.Spec.Priority = ptr.To[int32](0)
	mid := testutil.MakeWorkload("mid", "ns").Queue("a").PodSets(testutil.MakePodSet("main", 2, "cpu", "1").Unconstrained().Obj()).Obj()
	mid.CreationTimestamp = metav1.NewTime(created.Add(2 * time.Second))
	mid.Spec.Priority = ptr.To[int32](5)
	e := newSchedEnv(t, []client.Object{cq, el, low, mid}, nil, []*corev1.Node{tasNode("r1-n1", "r1", "6")}, interceptor.Funcs{})
	get := func(name string) *strata.Workload {
		t.Helper()
		var wl strata.Workload
		if err := e.c.Get(t.Context(), types.NamespacedName{Namespace: "ns", Name: name}, &wl); err != nil {
			t.Fatal(err)
		}
		return &wl
	}
	pass := func() {
		t.Helper()
		if err := e.s.Schedule(t.Context()); err != nil {
			t.Fatalf("Schedule(): %v", err)
		}
		e.settle()
		e.informed(t)
	}
	pass()
	if get("el").Status.Admission == nil || get("low").Status.Admission == nil || get("mid").Status.Admission == nil {
		t.Fatal("want all three admitted first")
	}
	// low's pods run: its capacity is held until they end.
	var lowPods []*corev1.Pod
	for i := range 2 {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("low-%d", i), UID: types.UID(fmt.Sprintf("low-%d", i)),
			Labels: map[string]string{strata.WorkloadLabel: "low", strata.TASLabel: "true"}},
			Spec: corev1.PodSpec{NodeName: "r1-n1", Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		e.s.cache.SetPod(p)
		lowPods = append(lowPods, p)
	}
	wl := get("el")
	wl.Spec.PodSets[0].Count = 4
	if err := e.c.Update(t.Context(), wl); err != nil {
		t.Fatal(err)
	}
	e.informed(t)
	pass()
	if c := meta.FindStatusCondition(get("low").Status.Conditions, strata.WorkloadEvicted); c == nil || c.Reason != strata.EvictedByPreemption {
		t.Fatalf("low: Evicted = %+v, want Preempted for el's pods added", c)
	}
	c := meta.FindStatusCondition(get("el").Status.Conditions, strata.WorkloadResized)
	if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "scaling up from 2 to 4 pods: preempting 1 workload(s) on flavor tas-flavor") {
		t.Fatalf("el: Resized = %+v, want False, preempting", c)
	}
	if n := get("el").Status.Admission.PodSetAssignments[0].Count; n != 2 {
		t.Fatalf("el admitted with %d pods while low's run, want 2", n)
	}
	if a := meta.FindStatusCondition(get("el").Status.Conditions, strata.WorkloadAdmitted); a == nil || a.Status != metav1.ConditionTrue {
		t.Fatalf("el: Admitted = %+v, want True throughout", a)
	}
	if restart {
		// What a new process starts with: no preemption in memory.
		e.s.preemptions = map[types.NamespacedName]*pendingPreemption{}
		e.s.charged = map[types.NamespacedName]bool{}
		e.s.preemptionsRestored = false
	}
	// low is queued again and waits: the quota it freed is el's; el
	// waits for low's pods, evicting nobody else.
	pass()
	if get("low").Status.Admission != nil {
		t.Fatal("low admitted again before el took what it freed")
	}
	if c := meta.FindStatusCondition(get("mid").Status.Conditions, strata.WorkloadEvicted); c != nil && c.Status == metav1.ConditionTrue {
		t.Fatalf("mid evicted too while low's pods terminate: %+v", c)
	}
	for _, p := range lowPods {
		e.s.cache.DeletePod(p.UID)
	}
	pass()
	if n := get("el").Status.Admission.PodSetAssignments[0].Count; n != 4 {
		t.Errorf("el admitted with %d pods once low's are gone, want 4", n)
	}
	if c := meta.FindStatusCondition(get("el").Status.Conditions, strata.WorkloadResized); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("el: Resized = %+v, want True", c)
	}
	if get("low").Status.Admission != nil {
		t.Error("low admitted beside el's 4 pods and mid's 2, beyond the queue's 6 CPUs")
	}
	if get("mid").Status.Admission == nil {
		t.Error("mid not admitted at the end")
	}
}

// TestScheduleResizedThenPreempted: a workload scaled up in place and
// preempted in the same pass frees the quota of its new size, not its
// old: the preemptor, which fits only in the new size's room, preempts
// it and holds what it freed.
func TestScheduleResizedThenPreempted(t *testing.T) {
	cq := testutil.MakeClusterQueue("a").Flavor("tas-flavor", "cpu", "6").
		Preemption(strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}).Obj()
	el := testutil.MakeWorkload("el", "ns").Queue("a").PodSets(testutil.MakePodSet("main", 2, "cpu", "1").Unconstrained().Obj()).Obj()
	el.CreationTimestamp = metav1.NewTime(created)
	el.Spec.Priority = ptr.To[int32](0)
	metav1.SetMetaDataAnnotation(&el.ObjectMeta, strata.ElasticJobAnnotation, "true")
	e := newSchedEnv(t, []client.Object{cq, el}, nil, []*corev1.Node{tasNode("r1-n1", "r1", "8")}, interceptor.Funcs{})
	get := func(name string) *strata.Workload {
		t.Helper()
		var wl strata.Workload
		if err := e.c.Get(t.Context(), types.NamespacedName{Namespace: "ns", Name: name}, &wl); err != nil {
			t.Fatal(err)
		}
		return &wl
	}
	pass := func() {
		t.Helper()
		if err := e.s.Schedule(t.Context()); err != nil {
			t.Fatalf("Schedule(): %v", err)
		}
		e.settle()
		e.informed(t)
	}
	pass()
	if get("el").Status.Admission == nil {
		t.Fatal("el not admitted first")
	}
	// In one pass: el scales up from 2 to 4 pods (the quota has room),
	// and hi, of a higher priority, asks for 5 of the 6 CPUs: it fits
	// once el's 4 are free, not if only el's first 2 were.
	wl := get("el")
	wl.Spec.PodSets[0].Count = 4
	if err := e.c.Update(t.Context(), wl); err != nil {
		t.Fatal(err)
	}
	hi := testutil.MakeWorkload("hi", "ns").Queue("a").PodSets(testutil.MakePodSet("main", 5, "cpu", "1").Unconstrained().Obj()).Obj()
	hi.CreationTimestamp = metav1.NewTime(created.Add(time.Second))
	hi.Spec.Priority = ptr.To[int32](100)
	if err := e.c.Create(t.Context(), hi); err != nil {
		t.Fatal(err)
	}
	e.informed(t)
	pass()
	if c := meta.FindStatusCondition(get("el").Status.Conditions, strata.WorkloadResized); c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "from 2 to 4 pods") {
		t.Fatalf("el: Resized = %+v, want True, from 2 to 4 pods, in the pass", c)
	}
	if c := meta.FindStatusCondition(get("el").Status.Conditions, strata.WorkloadEvicted); c == nil || c.Status != metav1.ConditionTrue || c.Reason != strata.EvictedByPreemption {
		t.Fatalf("el: Evicted = %+v, want True, Preempted for hi", c)
	}
	// el's pods never ran here: the same pass admits hi with the 5 CPUs
	// el's 4 left, which el's first 2 would not have.
	if get("hi").Status.Admission == nil {
		t.Fatalf("hi not admitted in the pass that preempted el: %+v", get("hi").Status.Conditions)
	}
	pass()
	if get("el").Status.Admission != nil {
		t.Error("el admitted again beside hi's 5 CPUs, beyond the queue's 6")
	}
}
