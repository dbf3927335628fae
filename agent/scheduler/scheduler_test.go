package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"strata.dev/strata/agent/cache"
	"strata.dev/strata/agent/index"
	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/config"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/scheme"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
)

const (
	rackLabel = "cloud.provider.com/topology-rack"
	hostLabel = strata.HostnameLabel
)

var created = time.Date(2025, time.March, 1, 12, 0, 0, 0, time.UTC)

// rl is a ResourceList from name/quantity pairs.
func rl(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

func TestCheckQuota(t *testing.T) {
	cases := map[string]struct {
		fq      strata.FlavorQuotas
		used    corev1.ResourceList
		podSets []strata.PodSet
		wantErr string
		// wantNever: no usage freeing up can help (inadmissibleError).
		wantNever bool
	}{
		"no quotas": {
			fq:      strata.FlavorQuotas{Name: "f"},
			used:    rl("cpu", "1000"),
			podSets: []strata.PodSet{testutil.MakePodSet("main", 100, "cpu", "8").Obj()},
		},
		"within quota": {
			fq:      testutil.MakeClusterQueue("cq").Flavor("f", "cpu", "10").Obj().Spec.Flavors[0],
			used:    rl("cpu", "3"),
			podSets: []strata.PodSet{testutil.MakePodSet("main", 3, "cpu", "2").Obj()},
		},
		"exactly at quota": {
			fq:      testutil.MakeClusterQueue("cq").Flavor("f", "cpu", "10").Obj().Spec.Flavors[0],
			used:    rl("cpu", "4"),
			podSets: []strata.PodSet{testutil.MakePodSet("main", 3, "cpu", "2").Obj()},
		},
		"nothing used yet": {
			fq:      testutil.MakeClusterQueue("cq").Flavor("f", "cpu", "10").Obj().Spec.Flavors[0],
			podSets: []strata.PodSet{testutil.MakePodSet("main", 5, "cpu", "2").Obj()},
		},
		"exceeded": {
			fq:      testutil.MakeClusterQueue("cq").Flavor("f", "cpu", "10").Obj().Spec.Flavors[0],
			used:    rl("cpu", "5"),
			podSets: []strata.PodSet{testutil.MakePodSet("main", 3, "cpu", "2").Obj()},
			wantErr: "quota: cpu needs 6, more than is left of the quota of 10",
		},
		"more than the whole quota": {
			fq:        testutil.MakeClusterQueue("cq").Flavor("f", "cpu", "10").Obj().Spec.Flavors[0],
			used:      rl("cpu", "3"),
			podSets:   []strata.PodSet{testutil.MakePodSet("main", 11, "cpu", "1").Obj()},
			wantErr:   "quota: cpu needs 11, more than the whole quota of 10",
			wantNever: true,
		},
		"pod sets are summed": {
			fq:   testutil.MakeClusterQueue("cq").Flavor("f", "cpu", "10").Obj().Spec.Flavors[0],
			used: rl("cpu", "2"),
			podSets: []strata.PodSet{
				testutil.MakePodSet("leader", 1, "cpu", "1").Obj(),
				testutil.MakePodSet("workers", 4, "cpu", "2").Obj(),
			},
			wantErr: "quota: cpu needs 9, more than is left of the quota of 10",
		},
		"the first exceeded resource is reported": {
			fq:      testutil.MakeClusterQueue("cq").Flavor("f", "cpu", "100", "memory", "4Gi").Obj().Spec.Flavors[0],
			used:    rl("cpu", "1", "memory", "1Gi"),
			podSets: []strata.PodSet{testutil.MakePodSet("main", 2, "cpu", "1", "memory", "2Gi").Obj()},
			wantErr: "quota: memory needs 4Gi, more than is left of the quota of 4Gi",
		},
		"resources the workload does not request are not limited": {
			fq:      testutil.MakeClusterQueue("cq").Flavor("f", "nvidia.com/gpu", "0").Obj().Spec.Flavors[0],
			used:    rl("nvidia.com/gpu", "8"),
			podSets: []strata.PodSet{testutil.MakePodSet("main", 2, "cpu", "1").Obj()},
		},
		"resources without a quota are not limited": {
			fq:      testutil.MakeClusterQueue("cq").Flavor("f", "cpu", "10").Obj().Spec.Flavors[0],
			used:    rl("cpu", "1"),
			podSets: []strata.PodSet{testutil.MakePodSet("main", 2, "cpu", "1", "memory", "1Ti").Obj()},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wl := testutil.MakeWorkload("w", "ns").PodSets(tc.podSets...).Obj()
			var gotErr string
			cq := testutil.MakeClusterQueue("cq").Obj()
			cq.Spec.Flavors = []strata.FlavorQuotas{tc.fq}
			books := queue.NewBooks([]*strata.ClusterQueue{cq})
			books.Charge("cq", tc.fq.Name, tc.used, 1)
			fit := books.Check("cq", tc.fq.Name, queue.WorkloadRequests(wl), false)
			if fit.Err != nil {
				gotErr = fit.Err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, gotErr); diff != "" {
				t.Errorf("Check() error (-want,+got):\n%s", diff)
			}
			if fit.Never != tc.wantNever {
				t.Errorf("Check() never: %t, want %t", fit.Never, tc.wantNever)
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	const limit = 32 * 1024
	cases := map[string]struct {
		in   string
		want string
	}{
		"empty": {
			in:   "",
			want: "",
		},
		"short": {
			in:   "waiting for capacity",
			want: "waiting for capacity",
		},
		"exactly the limit": {
			in:   strings.Repeat("a", limit),
			want: strings.Repeat("a", limit),
		},
		"one byte over the limit": {
			in:   strings.Repeat("a", limit+1),
			want: strings.Repeat("a", limit-3) + "...",
		},
		"a multi-byte character is not split": {
			in:   strings.Repeat("a", limit-4) + "é" + strings.Repeat("a", 10),
			want: strings.Repeat("a", limit-4) + "...",
		},
		"far over the limit": {
			in:   strings.Repeat("b", 3*limit),
			want: strings.Repeat("b", limit-3) + "...",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := truncate(tc.in)
			if len(got) > limit {
				t.Errorf("len(truncate()) = %d, want at most %d", len(got), limit)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("truncate() (-want,+got):\n%s", diff)
			}
		})
	}
}

// tasNode is a Ready API node of the "tas" pool in rack with cpu allocatable.
func tasNode(name, rack, cpu string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{hostLabel: name, rackLabel: rack, "pool": "tas"},
		},
		Status: corev1.NodeStatus{
			Allocatable: rl("cpu", cpu, "pods", "110"),
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
}

// hostCounts decodes a topology assignment to pods per host.
func hostCounts(t *testing.T, ta *strata.TopologyAssignment) map[string]int32 {
	t.Helper()
	a, err := tas.Decode(ta)
	if err != nil {
		t.Fatalf("Decode(): %v", err)
	}
	if diff := cmp.Diff([]string{hostLabel}, a.Levels); diff != "" {
		t.Errorf("TopologyAssignment levels (-want,+got):\n%s", diff)
	}
	out := map[string]int32{}
	for _, d := range a.Domains {
		out[d.Values[len(d.Values)-1]] += d.Count
	}
	return out
}

func TestPlaceOnFlavor(t *testing.T) {
	topo := testutil.MakeTopology("default", rackLabel, hostLabel).Obj()
	flavor := testutil.MakeResourceFlavor("tas-flavor").NodeLabel("pool", "tas").TopologyName("default").Obj()
	ignoreTA := cmpopts.IgnoreFields(strata.PodSetAssignment{}, "TopologyAssignment")
	cases := map[string]struct {
		podSets   []strata.PodSet
		want      *strata.Admission
		wantHosts []map[string]int32 // per pod set
		wantErr   string             // contained in the error
	}{
		"fits in one rack": {
			podSets: []strata.PodSet{testutil.MakePodSet("main", 5, "cpu", "1").Required(rackLabel).Obj()},
			want: &strata.Admission{
				ClusterQueue: "cq",
				PodSetAssignments: []strata.PodSetAssignment{
					{Name: "main", Flavor: "tas-flavor", Count: 5, ResourceUsage: rl("cpu", "5")},
				},
			},
			wantHosts: []map[string]int32{{"r1-n1": 4, "r1-n2": 1}},
		},
		"two pod sets": {
			podSets: []strata.PodSet{
				testutil.MakePodSet("leader", 1, "cpu", "2").Obj(),
				testutil.MakePodSet("workers", 3, "cpu", "1").Required(rackLabel).Obj(),
			},
			want: &strata.Admission{
				ClusterQueue: "cq",
				PodSetAssignments: []strata.PodSetAssignment{
					{Name: "leader", Flavor: "tas-flavor", Count: 1, ResourceUsage: rl("cpu", "2")},
					{Name: "workers", Flavor: "tas-flavor", Count: 3, ResourceUsage: rl("cpu", "3")},
				},
			},
			wantHosts: []map[string]int32{{"r1-n2": 1}, {"r1-n1": 3}},
		},
		"does not fit in one rack": {
			podSets: []strata.PodSet{testutil.MakePodSet("main", 7, "cpu", "1").Required(rackLabel).Obj()},
			wantErr: "rack required: the best rack fits 6 of 7 pods; limited by cpu (2 nodes)",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			snap := tas.NewSnapshot([]string{rackLabel, hostLabel}, flavor.Spec.NodeLabels)
			for _, n := range []*corev1.Node{
				tasNode("r1-n1", "r1", "4"), tasNode("r1-n2", "r1", "2"), tasNode("r2-n1", "r2", "2"),
			} {
				snap.SetNode(tas.NodeFromAPI(n, false))
			}
			wl := testutil.MakeWorkload("w", "ns").PodSets(tc.podSets...).Obj()
			got, err := placeOnFlavor(snap, topo, flavor, testutil.MakeClusterQueue("cq").Obj(), wl, nil, tas.DefaultOptions())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("placeOnFlavor() error = %v, want one containing %q", err, tc.wantErr)
				}
				if got != nil {
					t.Errorf("placeOnFlavor() admission = %v, want nil with an error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("placeOnFlavor(): %v", err)
			}
			if diff := cmp.Diff(tc.want, got, ignoreTA); diff != "" {
				t.Errorf("placeOnFlavor() (-want,+got):\n%s", diff)
			}
			var gotHosts []map[string]int32
			for _, psa := range got.PodSetAssignments {
				gotHosts = append(gotHosts, hostCounts(t, psa.TopologyAssignment))
			}
			if diff := cmp.Diff(tc.wantHosts, gotHosts); diff != "" {
				t.Errorf("placeOnFlavor() hosts per pod set (-want,+got):\n%s", diff)
			}
			// The snapshot is left unchanged: the same placement again.
			again, err := placeOnFlavor(snap, topo, flavor, testutil.MakeClusterQueue("cq").Obj(), wl, nil, tas.DefaultOptions())
			if err != nil {
				t.Fatalf("placeOnFlavor() a second time: %v", err)
			}
			if diff := cmp.Diff(got, again); diff != "" {
				t.Errorf("placeOnFlavor() a second time (-first,+second):\n%s", diff)
			}
		})
	}
}

func TestInflightStale(t *testing.T) {
	listed := func(uid, rv string) *strata.Workload {
		wl := testutil.MakeWorkload("w", "ns").Obj()
		wl.UID, wl.ResourceVersion = types.UID(uid), rv
		return wl
	}
	cases := map[string]struct {
		f    inflightAdmission
		wl   *strata.Workload
		want bool
	}{
		"still being written: the listed object is the one before the write": {
			f: inflightAdmission{uid: "u1"}, wl: listed("u1", "5"),
		},
		"written, the informer has not caught up": {
			f: inflightAdmission{uid: "u1", written: 7}, wl: listed("u1", "5"),
		},
		"written and seen without admission: evicted or requeued since": {
			f: inflightAdmission{uid: "u1", written: 7}, wl: listed("u1", "9"), want: true,
		},
		"the write's own result": {
			f: inflightAdmission{uid: "u1", written: 7}, wl: listed("u1", "7"), want: true,
		},
		"deleted and created again under the same name": {
			f: inflightAdmission{uid: "u1"}, wl: listed("u2", "3"), want: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.f.stale(tc.wl); got != tc.want {
				t.Errorf("stale() = %t, want %t", got, tc.want)
			}
		})
	}
}

// TestAdmitKeepsItsOwnAdmission checks that the in-flight admission later
// passes count against the quota is not the object the status write
// decodes the server's answer into: a pass reading it half decoded would
// not count the workload.
func TestAdmitKeepsItsOwnAdmission(t *testing.T) {
	wl := testutil.MakeWorkload("w", "ns").Queue("q").Obj()
	written := make(chan struct{})
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(wl).WithStatusSubresource(&strata.Workload{}).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				defer close(written)
				sent := obj.(*strata.Workload).Status.Admission
				err := c.SubResource(sub).Update(ctx, obj, opts...)
				// The real client decodes the answer into the structs it
				// sent (the fake allocates new ones); a moment of that.
				sent.PodSetAssignments = nil
				return err
			},
		}).Build()
	s := New(c, cache.New(), tas.Options{}, nil)
	admission := &strata.Admission{ClusterQueue: "q", PodSetAssignments: []strata.PodSetAssignment{
		{Name: "main", Flavor: "f", Count: 2, ResourceUsage: rl("cpu", "2")},
	}}
	want := admission.DeepCopy()
	admitted := wl.DeepCopy()
	admitted.Status.Admission = admission
	s.admit(context.Background(), admitted, "f", map[string]corev1.ResourceList{}, queue.NewBooks(nil))
	<-written
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.inflight[types.NamespacedName{Namespace: "ns", Name: "w"}]
	if f == nil {
		t.Fatal("no in-flight admission")
	}
	if diff := cmp.Diff(want, f.admission); diff != "" {
		t.Errorf("in-flight admission (-want,+got):\n%s", diff)
	}
}

// schedEnv is a Scheduler on a fake API server and a capacity cache.
type schedEnv struct {
	s *Scheduler
	c client.Client
}

// tasSetup puts topology "default" (rack, host) and the topology-aware
// flavor "tas-flavor" of the "tas" pool in a cache.
func tasSetup(cc *cache.Cache) {
	cc.SetTopology(testutil.MakeTopology("default", rackLabel, hostLabel).Obj())
	cc.SetFlavor(testutil.MakeResourceFlavor("tas-flavor").NodeLabel("pool", "tas").TopologyName("default").Obj())
}

// newSchedEnv returns a scheduler whose client serves objs through funcs,
// and whose cache is set up by setup (nil: tasSetup) and holds nodes. The
// index is fed every Workload of objs as the API server stored it. Unless
// objs has them, namespace "ns" exists and has a LocalQueue of the same
// name for every ClusterQueue of objs.
func newSchedEnv(t *testing.T, objs []client.Object, setup func(*cache.Cache), nodes []*corev1.Node, funcs interceptor.Funcs) *schedEnv {
	t.Helper()
	objs = withLocalQueues(objs)
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
		WithStatusSubresource(&strata.Workload{}, &strata.ClusterQueue{}).
		WithIndex(&corev1.Pod{}, index.PodWorkload, func(o client.Object) []string {
			if name := o.GetLabels()[strata.WorkloadLabel]; name != "" {
				return []string{name}
			}
			return nil
		}).
		WithInterceptorFuncs(funcs).Build()
	cc := cache.New()
	if setup == nil {
		setup = tasSetup
	}
	setup(cc)
	for _, n := range nodes {
		cc.SetNode(n)
	}
	e := &schedEnv{s: New(c, cc, tas.DefaultOptions(), &events.FakeRecorder{}), c: c}
	e.informed(t)
	return e
}

// withLocalQueues adds to objs namespace "ns" and a LocalQueue in it for
// every ClusterQueue, named as the ClusterQueue, unless objs has them.
func withLocalQueues(objs []client.Object) []client.Object {
	have := map[string]bool{}
	for _, o := range objs {
		switch o.(type) {
		case *corev1.Namespace:
			have["Namespace/"+o.GetName()] = true
		case *strata.LocalQueue:
			have["LocalQueue/"+o.GetName()] = true
		}
	}
	out := slices.Clone(objs)
	if !have["Namespace/ns"] {
		out = append(out, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}})
	}
	for _, o := range objs {
		if _, ok := o.(*strata.ClusterQueue); ok && !have["LocalQueue/"+o.GetName()] {
			out = append(out, testutil.MakeLocalQueue(o.GetName(), "ns", o.GetName()))
		}
	}
	return out
}

// informed feeds the index every Workload as the API server has it now, as
// the informer would.
func (e *schedEnv) informed(t *testing.T) {
	t.Helper()
	var wls strata.WorkloadList
	if err := e.c.List(context.Background(), &wls); err != nil {
		t.Fatal(err)
	}
	for i := range wls.Items {
		e.s.WorkloadEvent(&wls.Items[i], false)
	}
}

// settle waits until every admission write of the passes so far is done.
func (e *schedEnv) settle() {
	for range admissionWriters {
		e.s.writers <- struct{}{}
	}
	for range admissionWriters {
		<-e.s.writers
	}
}

// outcome is what a pass made of a workload: the Admitted condition's
// reason and message, and the flavor of an admission.
type outcome struct {
	Reason, Message, Flavor string
}

// outcomes are the workloads' outcomes by name, once the admission writes
// are done.
func (e *schedEnv) outcomes(t *testing.T) map[string]outcome {
	t.Helper()
	e.settle()
	var wls strata.WorkloadList
	if err := e.c.List(context.Background(), &wls); err != nil {
		t.Fatal(err)
	}
	out := map[string]outcome{}
	for _, wl := range wls.Items {
		var o outcome
		if c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted); c != nil {
			o.Reason, o.Message = c.Reason, c.Message
		}
		if a := wl.Status.Admission; a != nil && len(a.PodSetAssignments) > 0 {
			o.Flavor = a.PodSetAssignments[0].Flavor
		}
		out[wl.Name] = o
	}
	return out
}

// job is workload name in queue q of pods 1-cpu pods in one rack, created
// at created plus age seconds.
func job(name, q string, pods int32, priority *int32, age int) *strata.Workload {
	wl := testutil.MakeWorkload(name, "ns").Queue(q).
		PodSets(testutil.MakePodSet("main", pods, "cpu", "1").Required(rackLabel).Obj()).Obj()
	wl.Spec.Priority = priority
	wl.CreationTimestamp = metav1.NewTime(created.Add(time.Duration(age) * time.Second))
	return wl
}

// dispatchedAt makes wl the copy of a hub dispatch decided micros
// microseconds after created.
func dispatchedAt(wl *strata.Workload, micros int) *strata.Workload {
	metav1.SetMetaDataLabel(&wl.ObjectMeta, strata.HubWorkloadUIDLabel, "hub-"+wl.Name)
	metav1.SetMetaDataLabel(&wl.ObjectMeta, strata.DispatchGenerationLabel, "1")
	metav1.SetMetaDataAnnotation(&wl.ObjectMeta, strata.DispatchTimeAnnotation, created.Add(time.Duration(micros)*time.Microsecond).Format(metav1.RFC3339Micro))
	return wl
}

func strictFIFO(cq *strata.ClusterQueue) *strata.ClusterQueue {
	cq.Spec.QueueingStrategy = strata.StrictFIFO
	return cq
}

// Outcomes of a pass, whatever their message.
var (
	admitted = outcome{Reason: ReasonAdmitted, Flavor: "tas-flavor"}
	pending  = outcome{Reason: ReasonPending}
)

// withoutMessages clears the messages of got where want has none.
func withoutMessages(got, want map[string]outcome) map[string]outcome {
	for name, o := range got {
		if want[name].Message == "" {
			o.Message = ""
			got[name] = o
		}
	}
	return got
}

func TestScheduleServesQueuesFairly(t *testing.T) {
	queue := func(name string) *strata.ClusterQueue {
		return testutil.MakeClusterQueue(name).Flavor("tas-flavor").Obj()
	}
	cases := map[string]struct {
		queues    []*strata.ClusterQueue
		workloads []*strata.Workload
		rackCPU   string
		want      map[string]outcome
	}{
		"every queue's head before any queue's second workload": {
			queues: []*strata.ClusterQueue{queue("a"), queue("b")},
			workloads: []*strata.Workload{
				job("a1", "a", 2, nil, 0), job("a2", "a", 2, nil, 1), job("a3", "a", 2, nil, 2),
				job("b1", "b", 2, nil, 10),
			},
			rackCPU: "4",
			want:    map[string]outcome{"a1": admitted, "a2": pending, "a3": pending, "b1": admitted},
		},
		"a queue with a longer backlog takes what the others leave, in turns": {
			queues: []*strata.ClusterQueue{queue("a"), queue("b")},
			workloads: []*strata.Workload{
				job("a1", "a", 1, nil, 0), job("a2", "a", 1, nil, 1), job("a3", "a", 1, nil, 2),
				job("b1", "b", 1, nil, 10),
			},
			rackCPU: "3",
			want:    map[string]outcome{"a1": admitted, "a2": admitted, "a3": pending, "b1": admitted},
		},
		"in a round, the older head first, whatever the queues' names": {
			queues:    []*strata.ClusterQueue{queue("a"), queue("z")},
			workloads: []*strata.Workload{job("a1", "a", 2, nil, 10), job("z1", "z", 2, nil, 0)},
			rackCPU:   "2",
			want:      map[string]outcome{"a1": pending, "z1": admitted},
		},
		"in a round, the higher-priority head first": {
			queues:    []*strata.ClusterQueue{queue("a"), queue("z")},
			workloads: []*strata.Workload{job("a1", "a", 2, nil, 0), job("z1", "z", 2, ptr.To[int32](5), 10)},
			rackCPU:   "2",
			want:      map[string]outcome{"a1": pending, "z1": admitted},
		},
		"within a queue, priority then creation order": {
			queues: []*strata.ClusterQueue{queue("a")},
			workloads: []*strata.Workload{
				job("a1", "a", 2, nil, 0), job("a2", "a", 2, ptr.To[int32](5), 2), job("a3", "a", 2, ptr.To[int32](5), 1),
			},
			rackCPU: "4",
			want:    map[string]outcome{"a1": pending, "a2": admitted, "a3": admitted},
		},
		"copies created in one second: in the order the hub dispatched them, not by name": {
			queues: []*strata.ClusterQueue{queue("a")},
			workloads: []*strata.Workload{
				dispatchedAt(job("a1", "a", 2, nil, 0), 30), dispatchedAt(job("a2", "a", 2, nil, 0), 20), dispatchedAt(job("a3", "a", 2, nil, 0), 10),
			},
			rackCPU: "4",
			want:    map[string]outcome{"a1": pending, "a2": admitted, "a3": admitted},
		},
		"a StrictFIFO queue waits behind its head; the other queues are served": {
			queues: []*strata.ClusterQueue{strictFIFO(queue("a")), queue("b")},
			workloads: []*strata.Workload{
				job("a1", "a", 5, nil, 0), job("a2", "a", 1, nil, 1), job("b1", "b", 1, nil, 2), job("b2", "b", 1, nil, 3),
			},
			rackCPU: "4",
			want: map[string]outcome{
				"a1": pending,
				"a2": {Reason: ReasonPending, Message: "waiting in StrictFIFO ClusterQueue a behind workloads that do not fit yet"},
				"b1": admitted, "b2": admitted,
			},
		},
		"a BestEffortFIFO queue lets what fits pass its head": {
			queues: []*strata.ClusterQueue{queue("a"), queue("b")},
			workloads: []*strata.Workload{
				job("a1", "a", 5, nil, 0), job("a2", "a", 1, nil, 1), job("b1", "b", 1, nil, 2),
			},
			rackCPU: "4",
			want:    map[string]outcome{"a1": pending, "a2": admitted, "b1": admitted},
		},
		"in a round, a head that fits within its nominal quota before a higher-priority one that must borrow (Kueue)": {
			queues: []*strata.ClusterQueue{
				testutil.MakeClusterQueue("a").Cohort("c").Flavor("tas-flavor", "cpu", "4").Obj(),
				testutil.MakeClusterQueue("b").Cohort("c").Flavor("tas-flavor", "cpu", "4").Obj(),
			},
			workloads: []*strata.Workload{job("a1", "a", 6, ptr.To[int32](10), 0), job("b1", "b", 4, nil, 1)},
			rackCPU:   "10",
			want:      map[string]outcome{"a1": pending, "b1": admitted},
		},
		"a queue borrows what its cohort's other queue does not use": {
			queues: []*strata.ClusterQueue{
				testutil.MakeClusterQueue("a").Cohort("c").Flavor("tas-flavor", "cpu", "4").Obj(),
				testutil.MakeClusterQueue("b").Cohort("c").Flavor("tas-flavor", "cpu", "4").Obj(),
			},
			workloads: []*strata.Workload{job("a1", "a", 6, nil, 0)},
			rackCPU:   "10",
			want:      map[string]outcome{"a1": admitted},
		},
		"a stopped queue is out of its cohort: it lends nothing (Kueue's inactive ClusterQueue)": {
			queues: []*strata.ClusterQueue{
				testutil.MakeClusterQueue("a").Cohort("c").Flavor("tas-flavor", "cpu", "4").Obj(),
				stopped(testutil.MakeClusterQueue("b").Cohort("c").Flavor("tas-flavor", "cpu", "4").Obj()),
			},
			workloads: []*strata.Workload{job("a1", "a", 6, nil, 0)},
			rackCPU:   "10",
			want:      map[string]outcome{"a1": {Reason: ReasonInadmissible}}, // more than a's whole quota, with b gone
		},
		"a queue whose flavor is missing is out of its cohort: it lends nothing": {
			queues: []*strata.ClusterQueue{
				testutil.MakeClusterQueue("a").Cohort("c").Flavor("tas-flavor", "cpu", "4").Obj(),
				testutil.MakeClusterQueue("b").Cohort("c").Flavor("tas-flavor", "cpu", "4").Flavor("gone", "cpu", "4").Obj(),
			},
			workloads: []*strata.Workload{job("a1", "a", 6, nil, 0)},
			rackCPU:   "10",
			want:      map[string]outcome{"a1": {Reason: ReasonInadmissible}}, // more than a's whole quota, with b gone
		},
		"a queue whose admission check does not exist is out of its cohort: it lends nothing (Kueue's inactive ClusterQueue)": {
			queues: []*strata.ClusterQueue{
				testutil.MakeClusterQueue("a").Cohort("c").Flavor("tas-flavor", "cpu", "4").Obj(),
				withChecks(testutil.MakeClusterQueue("b").Cohort("c").Flavor("tas-flavor", "cpu", "4").Obj(), "missing"),
			},
			workloads: []*strata.Workload{job("a1", "a", 6, nil, 0)},
			rackCPU:   "10",
			want:      map[string]outcome{"a1": {Reason: ReasonInadmissible}}, // more than a's whole quota, with b gone
		},
		"a queue whose resource group covers pods counts them (Kueue)": {
			queues: []*strata.ClusterQueue{
				testutil.MakeClusterQueue("a").ResourceGroup("cpu", "pods").GroupFlavor("tas-flavor", "10", "3").Obj(),
			},
			workloads: []*strata.Workload{job("a1", "a", 2, nil, 0), job("a2", "a", 2, nil, 1), job("a3", "a", 4, nil, 2)},
			rackCPU:   "10",
			want: map[string]outcome{"a1": admitted, "a2": {Reason: ReasonPending, Message: "waiting for capacity: flavor tas-flavor: quota: pods needs 2, more than is left of the quota of 3"},
				"a3": {Reason: ReasonInadmissible, Message: "cannot be admitted by ClusterQueue a as written: flavor tas-flavor: quota: pods needs 4, more than the whole quota of 3"}},
		},
		"a queue that does not cover pods does not count them": {
			queues: []*strata.ClusterQueue{
				testutil.MakeClusterQueue("a").ResourceGroup("cpu").GroupFlavor("tas-flavor", "10").Obj(),
			},
			workloads: []*strata.Workload{job("a1", "a", 2, nil, 0), job("a2", "a", 2, nil, 1)},
			rackCPU:   "10",
			want:      map[string]outcome{"a1": admitted, "a2": admitted},
		},
		"workloads of a ClusterQueue that does not exist are left alone": {
			queues:    []*strata.ClusterQueue{queue("b")},
			workloads: []*strata.Workload{job("a1", "a", 1, nil, 0), job("b1", "b", 1, nil, 1)},
			rackCPU:   "4",
			want:      map[string]outcome{"a1": {}, "b1": admitted},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var objs []client.Object
			for _, cq := range tc.queues {
				objs = append(objs, cq)
			}
			for _, wl := range tc.workloads {
				objs = append(objs, wl)
			}
			e := newSchedEnv(t, objs, nil, []*corev1.Node{tasNode("r1-n1", "r1", tc.rackCPU)}, interceptor.Funcs{})
			if err := e.s.Schedule(t.Context()); err != nil {
				t.Fatalf("Schedule(): %v", err)
			}
			if diff := cmp.Diff(tc.want, withoutMessages(e.outcomes(t), tc.want)); diff != "" {
				t.Errorf("outcomes (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestScheduleResolvesLocalQueues checks that a workload's queue name is a
// LocalQueue of its namespace, admitted by the ClusterQueue it points at
// now, within that ClusterQueue's namespaceSelector.
func TestScheduleResolvesLocalQueues(t *testing.T) {
	cq := func(name string, nsLabels map[string]string) *strata.ClusterQueue {
		q := testutil.MakeClusterQueue(name).Flavor("tas-flavor", "cpu", "3").Obj()
		q.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: nsLabels}
		return q
	}
	ns := func(name string, labels map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	in := func(wl *strata.Workload, ns string) *strata.Workload {
		wl.Namespace = ns
		return wl
	}
	cases := map[string]struct {
		objs []client.Object
		want map[string]outcome
		// wantPending is the ClusterQueues' pending counts, as the pass
		// writes them before it admits.
		wantPending map[string]int32
	}{
		"two LocalQueues share their ClusterQueue's quota": {
			objs: []client.Object{cq("gpu", nil), ns("ns", nil),
				testutil.MakeLocalQueue("team-a", "ns", "gpu"), testutil.MakeLocalQueue("team-b", "ns", "gpu"),
				job("a1", "team-a", 2, nil, 0), job("b1", "team-b", 2, nil, 1)},
			want:        map[string]outcome{"a1": admitted, "b1": pending},
			wantPending: map[string]int32{"gpu": 2},
		},
		"the queue name is looked up in the workload's namespace": {
			objs: []client.Object{cq("gpu", nil), ns("ns", nil), ns("other", nil),
				testutil.MakeLocalQueue("team-a", "other", "gpu"),
				job("a1", "team-a", 1, nil, 0), in(job("o1", "team-a", 1, nil, 1), "other")},
			want:        map[string]outcome{"a1": {}, "o1": admitted},
			wantPending: map[string]int32{"gpu": 1},
		},
		"a LocalQueue whose ClusterQueue does not exist holds its workloads": {
			objs: []client.Object{cq("gpu", nil), ns("ns", nil),
				testutil.MakeLocalQueue("team-a", "ns", "gone"), testutil.MakeLocalQueue("team-b", "ns", "gpu"),
				job("a1", "team-a", 1, nil, 0), job("b1", "team-b", 1, nil, 1)},
			want:        map[string]outcome{"a1": {}, "b1": admitted},
			wantPending: map[string]int32{"gpu": 1},
		},
		"the ClusterQueue's namespaceSelector still applies": {
			objs: []client.Object{cq("gpu", map[string]string{"team": "ml"}), ns("ns", map[string]string{"team": "web"}), ns("ml", map[string]string{"team": "ml"}),
				testutil.MakeLocalQueue("q", "ns", "gpu"), testutil.MakeLocalQueue("q", "ml", "gpu"),
				job("web1", "q", 1, nil, 0), in(job("ml1", "q", 1, nil, 1), "ml")},
			want:        map[string]outcome{"web1": {}, "ml1": admitted},
			wantPending: map[string]int32{"gpu": 1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newSchedEnv(t, tc.objs, nil, []*corev1.Node{tasNode("r1-n1", "r1", "4")}, interceptor.Funcs{})
			if err := e.s.Schedule(t.Context()); err != nil {
				t.Fatalf("Schedule(): %v", err)
			}
			if diff := cmp.Diff(tc.want, withoutMessages(e.outcomes(t), tc.want)); diff != "" {
				t.Errorf("outcomes (-want,+got):\n%s", diff)
			}
			var cqs strata.ClusterQueueList
			if err := e.c.List(t.Context(), &cqs); err != nil {
				t.Fatal(err)
			}
			gotPending := map[string]int32{}
			for _, q := range cqs.Items {
				gotPending[q.Name] = q.Status.PendingWorkloads
			}
			if diff := cmp.Diff(tc.wantPending, gotPending); diff != "" {
				t.Errorf("pending workloads of the ClusterQueues (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestScheduleIsolatesFailuresPerQueue(t *testing.T) {
	boom := errors.New("boom")
	// statusUpdate fails the status write of the object named name, of
	// type T (with an admission or without: admission).
	statusUpdate := func(name string, fail func(client.Object) bool) interceptor.Funcs {
		return interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				if obj.GetName() == name && fail(obj) {
					return boom
				}
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
		}
	}
	isQueue := func(obj client.Object) bool { _, ok := obj.(*strata.ClusterQueue); return ok }
	isAdmission := func(obj client.Object) bool {
		wl, ok := obj.(*strata.Workload)
		return ok && wl.Status.Admission != nil
	}
	isReason := func(obj client.Object) bool {
		wl, ok := obj.(*strata.Workload)
		return ok && wl.Status.Admission == nil
	}
	cases := map[string]struct {
		funcs   interceptor.Funcs
		want    map[string]outcome
		wantErr bool
	}{
		"a ClusterQueue's status write fails": {
			funcs:   statusUpdate("a", isQueue),
			want:    map[string]outcome{"a1": pending, "a2": admitted, "b1": admitted},
			wantErr: true,
		},
		"the ClusterQueues cannot be listed for their status": {
			funcs: interceptor.Funcs{
				List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					if _, ok := list.(*strata.ClusterQueueList); ok {
						return boom
					}
					return c.List(ctx, list, opts...)
				},
			},
			want:    map[string]outcome{"a1": pending, "a2": admitted, "b1": admitted},
			wantErr: true,
		},
		"a ClusterQueue cannot be read": {
			funcs: interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if _, ok := obj.(*strata.ClusterQueue); ok && key.Name == "a" {
						return boom
					}
					return c.Get(ctx, key, obj, opts...)
				},
			},
			want:    map[string]outcome{"a1": {}, "a2": {}, "b1": admitted},
			wantErr: true,
		},
		"a workload's pending reason cannot be written": {
			funcs:   statusUpdate("a1", isReason),
			want:    map[string]outcome{"a1": {}, "a2": admitted, "b1": admitted},
			wantErr: true,
		},
		"a workload's admission cannot be written": {
			funcs: statusUpdate("a2", isAdmission),
			want:  map[string]outcome{"a1": pending, "a2": {}, "b1": admitted},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := []client.Object{
				testutil.MakeClusterQueue("a").Flavor("tas-flavor").Obj(),
				testutil.MakeClusterQueue("b").Flavor("tas-flavor").Obj(),
				job("a1", "a", 5, nil, 0), job("a2", "a", 1, nil, 1), job("b1", "b", 1, nil, 2),
			}
			e := newSchedEnv(t, objs, nil, []*corev1.Node{tasNode("r1-n1", "r1", "4")}, tc.funcs)
			err := e.s.Schedule(t.Context())
			if diff := cmp.Diff(tc.want, withoutMessages(e.outcomes(t), tc.want)); diff != "" {
				t.Errorf("outcomes (-want,+got):\n%s", diff)
			}
			// A failure in the pass is returned, so that Start logs it and
			// retries; an admission write fails on its own goroutine, which
			// logs it and wakes the scheduler.
			if got := errors.Is(err, boom); got != tc.wantErr {
				t.Errorf("Schedule() error = %v, want boom: %t", err, tc.wantErr)
			}
		})
	}
}

// setups of the capacity cache for flavors that are not ready.
var (
	noFlavor = func(cc *cache.Cache) {
		cc.SetTopology(testutil.MakeTopology("default", rackLabel, hostLabel).Obj())
	}
	noTopologyName = func(cc *cache.Cache) {
		cc.SetTopology(testutil.MakeTopology("default", rackLabel, hostLabel).Obj())
		cc.SetFlavor(testutil.MakeResourceFlavor("tas-flavor").NodeLabel("pool", "tas").Obj())
	}
	noTopology = func(cc *cache.Cache) {
		cc.SetFlavor(testutil.MakeResourceFlavor("tas-flavor").NodeLabel("pool", "tas").TopologyName("default").Obj())
	}
)

// activeCondition is a ClusterQueue's Active condition, without its time.
func activeCondition(t *testing.T, c client.Client, name string) metav1.Condition {
	t.Helper()
	var cq strata.ClusterQueue
	if err := c.Get(context.Background(), types.NamespacedName{Name: name}, &cq); err != nil {
		t.Fatal(err)
	}
	cond := meta.FindStatusCondition(cq.Status.Conditions, "Active")
	if cond == nil {
		return metav1.Condition{}
	}
	return metav1.Condition{Type: cond.Type, Status: cond.Status, Reason: cond.Reason, Message: cond.Message}
}

func TestScheduleFlavorNotReady(t *testing.T) {
	cases := map[string]struct {
		setup     func(*cache.Cache)
		queue     *strata.ClusterQueue
		workloads []*strata.Workload
		want      map[string]outcome
	}{
		"the ResourceFlavor does not exist": {
			setup:     noFlavor,
			queue:     testutil.MakeClusterQueue("cq").Flavor("tas-flavor").Obj(),
			workloads: []*strata.Workload{job("w", "cq", 1, nil, 0)},
			want: map[string]outcome{"w": {Reason: ReasonInadmissible,
				Message: `cannot be admitted by ClusterQueue cq: ResourceFlavor "tas-flavor" does not exist`}},
		},
		"the ResourceFlavor has no topologyName": {
			setup:     noTopologyName,
			queue:     testutil.MakeClusterQueue("cq").Flavor("tas-flavor").Obj(),
			workloads: []*strata.Workload{job("w", "cq", 1, nil, 0)},
			want: map[string]outcome{"w": {Reason: ReasonInadmissible,
				Message: `cannot be admitted by ClusterQueue cq: ResourceFlavor "tas-flavor" has no topologyName`}},
		},
		"the ResourceFlavor's Topology does not exist": {
			setup:     noTopology,
			queue:     testutil.MakeClusterQueue("cq").Flavor("tas-flavor").Obj(),
			workloads: []*strata.Workload{job("w", "cq", 1, nil, 0)},
			want: map[string]outcome{"w": {Reason: ReasonInadmissible,
				Message: `cannot be admitted by ClusterQueue cq: Topology "default" of ResourceFlavor "tas-flavor" does not exist`}},
		},
		"a missing flavor is the reason before its quota": {
			setup:     noFlavor,
			queue:     testutil.MakeClusterQueue("cq").Flavor("tas-flavor", "cpu", "1").Obj(),
			workloads: []*strata.Workload{job("w", "cq", 2, nil, 0)},
			want: map[string]outcome{"w": {Reason: ReasonInadmissible,
				Message: `cannot be admitted by ClusterQueue cq: ResourceFlavor "tas-flavor" does not exist`}},
		},
		"under StrictFIFO, a head on missing flavors blocks the queue (Kueue's queue admits nothing then)": {
			setup:     noFlavor,
			queue:     strictFIFO(testutil.MakeClusterQueue("cq").Flavor("tas-flavor").Obj()),
			workloads: []*strata.Workload{job("w1", "cq", 1, nil, 0), job("w2", "cq", 1, nil, 1)},
			want: map[string]outcome{
				"w1": {Reason: ReasonInadmissible, Message: `cannot be admitted by ClusterQueue cq: ResourceFlavor "tas-flavor" does not exist`},
				"w2": {Reason: ReasonPending, Message: "waiting in StrictFIFO ClusterQueue cq behind workloads that do not fit yet"},
			},
		},
		"a missing flavor and one that cannot take the workload as written": {
			queue:     testutil.MakeClusterQueue("cq").Flavor("gone").Flavor("tas-flavor", "cpu", "4").Obj(),
			workloads: []*strata.Workload{job("w", "cq", 5, nil, 0)},
			want: map[string]outcome{"w": {Reason: ReasonInadmissible,
				Message: `cannot be admitted by ClusterQueue cq: ResourceFlavor "gone" does not exist; flavor tas-flavor: quota: cpu needs 5, more than the whole quota of 4`}},
		},
		"a missing flavor and one without capacity yet: the workload waits for capacity": {
			queue:     testutil.MakeClusterQueue("cq").Flavor("gone").Flavor("tas-flavor").Obj(),
			workloads: []*strata.Workload{job("w", "cq", 5, nil, 0)},
			want: map[string]outcome{"w": {Reason: ReasonPending,
				Message: `waiting for capacity: ResourceFlavor "gone" does not exist; flavor tas-flavor: rack required: the best rack fits 4 of 5 pods; limited by cpu (1 node)`}},
		},
		"a missing flavor and one that fits: admitted on it": {
			queue:     testutil.MakeClusterQueue("cq").Flavor("gone").Flavor("tas-flavor").Obj(),
			workloads: []*strata.Workload{job("w", "cq", 1, nil, 0)},
			want:      map[string]outcome{"w": admitted},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := []client.Object{tc.queue}
			for _, wl := range tc.workloads {
				objs = append(objs, wl)
			}
			e := newSchedEnv(t, objs, tc.setup, []*corev1.Node{tasNode("r1-n1", "r1", "4")}, interceptor.Funcs{})
			if err := e.s.Schedule(t.Context()); err != nil {
				t.Fatalf("Schedule(): %v", err)
			}
			if diff := cmp.Diff(tc.want, withoutMessages(e.outcomes(t), tc.want)); diff != "" {
				t.Errorf("outcomes (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestScheduleFlavorBecomesReady checks that a workload Inadmissible for
// its flavor is admitted, without anything else happening, once the
// flavor or its Topology is there: the capacity cache signals the change,
// on which Start runs a pass.
func TestScheduleFlavorBecomesReady(t *testing.T) {
	cases := map[string]struct {
		setup, fix func(*cache.Cache)
	}{
		"the ResourceFlavor is created":            {setup: noFlavor, fix: tasSetup},
		"the ResourceFlavor gets its topologyName": {setup: noTopologyName, fix: tasSetup},
		"the Topology is created":                  {setup: noTopology, fix: tasSetup},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := []client.Object{testutil.MakeClusterQueue("cq").Flavor("tas-flavor").Obj(), job("w", "cq", 1, nil, 0)}
			e := newSchedEnv(t, objs, tc.setup, []*corev1.Node{tasNode("r1-n1", "r1", "4")}, interceptor.Funcs{})
			if err := e.s.Schedule(t.Context()); err != nil {
				t.Fatalf("Schedule(): %v", err)
			}
			if got := e.outcomes(t)["w"].Reason; got != ReasonInadmissible {
				t.Fatalf("before the flavor is fixed: reason %q, want %q", got, ReasonInadmissible)
			}
			select {
			case <-e.s.cache.Changed():
			default:
			}
			tc.fix(e.s.cache)
			select {
			case <-e.s.cache.Changed():
			default:
				t.Fatal("the capacity cache did not signal the change: no pass would run")
			}
			e.informed(t) // the Inadmissible condition's write
			// As a second later: ClusterQueue status writes are at most one
			// per queueStatusInterval.
			clear(e.s.queueStatusAt)
			if err := e.s.Schedule(t.Context()); err != nil {
				t.Fatalf("Schedule(): %v", err)
			}
			if diff := cmp.Diff(map[string]outcome{"w": admitted}, withoutMessages(e.outcomes(t), nil)); diff != "" {
				t.Errorf("outcomes once the flavor is fixed (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(metav1.Condition{Type: "Active", Status: metav1.ConditionTrue, Reason: "Ready", Message: "can admit workloads"},
				activeCondition(t, e.c, "cq")); diff != "" {
				t.Errorf("ClusterQueue's Active condition (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestAdmissionWriteOutcome: an admission whose write failed gives its
// capacity back only when the write certainly was not applied; after a
// timeout the workload is read again from the API server first.
func TestAdmissionWriteOutcome(t *testing.T) {
	timeout := apierrors.NewTimeoutError("the request timed out", 1)
	conflict := apierrors.NewConflict(schema.GroupResource{Group: "strata.dev", Resource: "workloads"}, "w", errors.New("changed"))
	// admissionWrite fails the admission write of workload w with err,
	// after applying it when apply is set.
	admissionWrite := func(err error, apply bool) interceptor.Funcs {
		return interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				if wl, ok := obj.(*strata.Workload); ok && wl.Name == "w" && wl.Status.Admission != nil {
					if apply {
						if err := c.SubResource(sub).Update(ctx, obj, opts...); err != nil {
							return err
						}
					}
					return err
				}
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
		}
	}
	cases := map[string]struct {
		funcs        interceptor.Funcs
		wantCapacity bool // the cache still holds w's capacity
		wantAdmitted bool // as the API server has it
	}{
		"written":                              {funcs: interceptor.Funcs{}, wantCapacity: true, wantAdmitted: true},
		"timed out, but the server applied it": {funcs: admissionWrite(timeout, true), wantCapacity: true, wantAdmitted: true},
		"timed out, and it was not applied":    {funcs: admissionWrite(timeout, false)},
		"refused with a conflict":              {funcs: admissionWrite(conflict, false)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := []client.Object{testutil.MakeClusterQueue("cq").Flavor("tas-flavor").Obj(), job("w", "cq", 4, nil, 0)}
			e := newSchedEnv(t, objs, nil, []*corev1.Node{tasNode("r1-n1", "r1", "4")}, tc.funcs)
			if err := e.s.Schedule(t.Context()); err != nil {
				t.Fatalf("Schedule(): %v", err)
			}
			got := e.outcomes(t)["w"]
			if admitted := got.Reason == ReasonAdmitted; admitted != tc.wantAdmitted {
				t.Errorf("admitted on the server: %v, want %v (%+v)", admitted, tc.wantAdmitted, got)
			}
			if held := e.s.cache.HasWorkload(types.NamespacedName{Namespace: "ns", Name: "w"}); held != tc.wantCapacity {
				t.Errorf("the cache holds w's capacity: %v, want %v", held, tc.wantCapacity)
			}
		})
	}
}

// TestPendingReasonWrites: a waiting workload's reason is written (with an
// event) when its meaning changes, not when only its numbers do.
func TestPendingReasonWrites(t *testing.T) {
	writes := 0
	funcs := interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if _, ok := obj.(*strata.Workload); ok {
				writes++
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	}
	objs := []client.Object{testutil.MakeClusterQueue("cq").Flavor("tas-flavor").Obj(), job("w", "cq", 4, nil, 0)}
	e := newSchedEnv(t, objs, nil, []*corev1.Node{tasNode("r1-n1", "r1", "2")}, funcs)
	pass := func() {
		t.Helper()
		clear(e.s.queueStatusAt)
		if err := e.s.Schedule(t.Context()); err != nil {
			t.Fatalf("Schedule(): %v", err)
		}
		e.settle()
		e.informed(t)
	}
	pass()
	if writes != 1 {
		t.Fatalf("first pass: %d workload writes, want 1 (the pending reason)", writes)
	}
	first := e.outcomes(t)["w"].Message
	// More room, still not enough: the numbers change, not the meaning.
	e.s.cache.SetNode(tasNode("r1-n1", "r1", "3"))
	pass()
	if writes != 1 {
		t.Errorf("after a capacity change that does not change the reason: %d workload writes, want 1", writes)
	}
	// Room for it: admitted.
	e.s.cache.SetNode(tasNode("r1-n1", "r1", "4"))
	pass()
	if got := e.outcomes(t)["w"]; got.Reason != ReasonAdmitted || writes != 2 {
		t.Errorf("with room: %+v after %d writes; want admitted after 2 (first reason: %s)", got, writes, first)
	}
}

// recordedEvent is an event as the test recorder saw it.
type recordedEvent struct {
	Kind, Name, UID, Reason, Note string
}

// refRecorder records the object each event regards.
type refRecorder struct{ events []recordedEvent }

func (r *refRecorder) Eventf(regarding, _ runtime.Object, _, reason, _, note string, args ...interface{}) {
	ev := recordedEvent{Reason: reason, Note: fmt.Sprintf(note, args...)}
	switch o := regarding.(type) {
	case *corev1.ObjectReference:
		ev.Kind, ev.Name, ev.UID = o.Kind, o.Name, string(o.UID)
	case *strata.Workload:
		ev.Kind, ev.Name, ev.UID = "Workload", o.Name, string(o.UID)
	}
	r.events = append(r.events, ev)
}

// TestPendingReasonOnTheJob: why a workload waits goes on its Job too —
// the Job that controls it, by UID — once per reason: a pass that finds
// the same reason says nothing.
func TestPendingReasonOnTheJob(t *testing.T) {
	owned := job("job-train", "cq", 5, nil, 0)
	owned.UID = "wl-uid"
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "train-uid", Controller: ptr.To(true)}}
	orphan := job("job-orphan", "cq", 5, nil, 1)
	orphan.UID = "orphan-uid"
	const why = "waiting for capacity: flavor tas-flavor: rack required: the best rack fits 4 of 5 pods; limited by cpu (1 node)"
	e := newSchedEnv(t, []client.Object{testutil.MakeClusterQueue("cq").Flavor("tas-flavor").Obj(), owned, orphan}, nil,
		[]*corev1.Node{tasNode("r1-n1", "r1", "4")}, interceptor.Funcs{})
	rec := &refRecorder{}
	e.s.recorder = rec
	for pass := range 3 {
		if err := e.s.Schedule(t.Context()); err != nil {
			t.Fatalf("Schedule() pass %d: %v", pass, err)
		}
		e.informed(t)
	}
	want := []recordedEvent{
		{Kind: "Workload", Name: "job-train", UID: "wl-uid", Reason: ReasonPending, Note: why},
		{Kind: "Job", Name: "train", UID: "train-uid", Reason: ReasonPending, Note: why},
		{Kind: "Workload", Name: "job-orphan", UID: "orphan-uid", Reason: ReasonPending, Note: why},
	}
	if diff := cmp.Diff(want, rec.events, cmpopts.SortSlices(func(a, b recordedEvent) bool { return a.Kind+a.Name < b.Kind+b.Name })); diff != "" {
		t.Errorf("events (-want,+got):\n%s", diff)
	}
}

func TestTruncateNote(t *testing.T) {
	cases := map[string]struct{ in, want string }{
		"short":        {in: "fits", want: "fits"},
		"at the limit": {in: strings.Repeat("a", maxEventNote), want: strings.Repeat("a", maxEventNote)},
		"over, ASCII":  {in: strings.Repeat("a", maxEventNote+1), want: strings.Repeat("a", maxEventNote-3) + "..."},
		"over, a rune": {in: strings.Repeat("a", maxEventNote-4) + "é" + strings.Repeat("a", 10), want: strings.Repeat("a", maxEventNote-4) + "..."},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, truncateNote(tc.in)); diff != "" {
				t.Errorf("truncateNote() (-want,+got):\n%s", diff)
			}
		})
	}
}

// twoFlavors puts topology "default" and two topology-aware flavors in a
// cache: "tas-flavor" of the "tas" pool and "other" of the "other" pool.
func twoFlavors(cc *cache.Cache) {
	tasSetup(cc)
	cc.SetFlavor(testutil.MakeResourceFlavor("other").NodeLabel("pool", "other").TopologyName("default").Obj())
}

// otherNode is a Ready API node of the "other" pool in rack with cpu
// allocatable.
func otherNode(name, rack, cpu string) *corev1.Node {
	n := tasNode(name, rack, cpu)
	n.Labels["pool"] = "other"
	return n
}

// podSetsPinned is a workload whose pod sets a hub pinned to flavors
// ("name=flavor,...").
func podSetsPinned(wl *strata.Workload, pins string) *strata.Workload {
	metav1.SetMetaDataAnnotation(&wl.ObjectMeta, strata.PodSetFlavorsAnnotation, pins)
	return wl
}

// pinnedTo is a workload a hub pinned to flavor.
func pinnedTo(wl *strata.Workload, flavor string) *strata.Workload {
	metav1.SetMetaDataAnnotation(&wl.ObjectMeta, strata.FlavorAnnotation, flavor)
	return wl
}

// TestSchedulePinnedFlavor: a workload a hub pinned to a flavor is tried on
// that flavor of its queue alone; it is Inadmissible when the queue does
// not have it. Workloads without a pin are tried on every flavor as
// before.
func TestSchedulePinnedFlavor(t *testing.T) {
	onOther := outcome{Reason: ReasonAdmitted, Flavor: "other"}
	cases := map[string]struct {
		queue     *strata.ClusterQueue
		workloads []*strata.Workload
		want      map[string]outcome
	}{
		"pinned to the queue's second flavor: admitted there, though the first has room": {
			queue:     testutil.MakeClusterQueue("cq").Flavor("other").Flavor("tas-flavor").Obj(),
			workloads: []*strata.Workload{pinnedTo(job("pinned", "cq", 2, nil, 0), "tas-flavor"), job("free", "cq", 2, nil, 1)},
			want:      map[string]outcome{"pinned": admitted, "free": onOther},
		},
		"pinned to a flavor the queue does not have: Inadmissible, naming it": {
			queue:     testutil.MakeClusterQueue("cq").Flavor("other").Obj(),
			workloads: []*strata.Workload{pinnedTo(job("w", "cq", 1, nil, 0), "tas-flavor")},
			want: map[string]outcome{"w": {Reason: ReasonInadmissible,
				Message: `the hub pinned flavor "tas-flavor" (annotation strata.dev/flavor), which ClusterQueue "cq" does not have`}},
		},
		"the pinned flavor is full: pending as usual, the other flavor is not tried": {
			queue:     testutil.MakeClusterQueue("cq").Flavor("other").Flavor("tas-flavor").Obj(),
			workloads: []*strata.Workload{pinnedTo(job("w", "cq", 5, nil, 0), "tas-flavor")},
			want: map[string]outcome{"w": {Reason: ReasonPending,
				Message: "waiting for capacity: flavor tas-flavor: rack required: the best rack fits 4 of 5 pods; limited by cpu (1 node)"}},
		},
		"only the pinned flavor's quota counts: more than its whole quota is Inadmissible as usual": {
			queue:     testutil.MakeClusterQueue("cq").Flavor("other", "cpu", "8").Flavor("tas-flavor", "cpu", "1").Obj(),
			workloads: []*strata.Workload{pinnedTo(job("w", "cq", 2, nil, 0), "tas-flavor")},
			want: map[string]outcome{"w": {Reason: ReasonInadmissible,
				Message: "cannot be admitted by ClusterQueue cq as written: flavor tas-flavor: quota: cpu needs 2, more than the whole quota of 1"}},
		},
		"the pinned flavor is listed but does not exist: Inadmissible as usual": {
			queue:     testutil.MakeClusterQueue("cq").Flavor("other").Flavor("gone").Obj(),
			workloads: []*strata.Workload{pinnedTo(job("w", "cq", 1, nil, 0), "gone")},
			want: map[string]outcome{"w": {Reason: ReasonInadmissible,
				Message: `cannot be admitted by ClusterQueue cq: ResourceFlavor "gone" does not exist`}},
		},
		"pod sets pinned to a flavor the queue does not have: Inadmissible, naming it": {
			queue:     testutil.MakeClusterQueue("cq").Flavor("other").Obj(),
			workloads: []*strata.Workload{podSetsPinned(job("w", "cq", 1, nil, 0), "main=tas-flavor")},
			want: map[string]outcome{"w": {Reason: ReasonInadmissible,
				Message: `the hub placed pod set main on flavor "tas-flavor" (annotation strata.dev/pod-set-flavors), which ClusterQueue "cq" does not have`}},
		},
		"pod sets pinned by an annotation that names a pod set the workload lacks: Inadmissible, naming it": {
			queue:     testutil.MakeClusterQueue("cq").Flavor("other").Flavor("tas-flavor").Obj(),
			workloads: []*strata.Workload{podSetsPinned(job("w", "cq", 1, nil, 0), "main=other,launcher=other")},
			want: map[string]outcome{"w": {Reason: ReasonInadmissible,
				Message: `annotation strata.dev/pod-set-flavors="main=other,launcher=other": the workload has no pod set launcher`}},
		},
		"a pod set pinned to a full flavor: pending, the other flavor is not tried": {
			queue:     testutil.MakeClusterQueue("cq").Flavor("other").Flavor("tas-flavor").Obj(),
			workloads: []*strata.Workload{podSetsPinned(job("w", "cq", 5, nil, 0), "main=tas-flavor")},
			want: map[string]outcome{"w": {Reason: ReasonPending,
				Message: "waiting for capacity: flavor tas-flavor: rack required: the best rack fits 4 of 5 pods; limited by cpu (1 node)"}},
		},
		"pod sets pinned to different flavors, one too large for its own: pending, saying which and why": {
			queue: testutil.MakeClusterQueue("cq").Flavor("other").Flavor("tas-flavor").Obj(),
			workloads: []*strata.Workload{func() *strata.Workload {
				wl := job("w", "cq", 1, nil, 0)
				wl.Spec.PodSets = append(wl.Spec.PodSets, testutil.MakePodSet("second", 5, "cpu", "1").Required(rackLabel).Obj())
				return podSetsPinned(wl, "main=other,second=tas-flavor")
			}()},
			want: map[string]outcome{"w": {Reason: ReasonPending,
				Message: "waiting for capacity: pod set second: flavor tas-flavor: rack required: the best rack fits 4 of 5 pods; limited by cpu (1 node); its pod sets may be admitted on different flavors once each has room"}},
		},
		"under StrictFIFO, a head pinned to a flavor the queue lacks does not block it": {
			queue:     strictFIFO(testutil.MakeClusterQueue("cq").Flavor("other").Obj()),
			workloads: []*strata.Workload{pinnedTo(job("w1", "cq", 1, nil, 0), "tas-flavor"), job("w2", "cq", 1, nil, 1)},
			want: map[string]outcome{
				"w1": {Reason: ReasonInadmissible, Message: `the hub pinned flavor "tas-flavor" (annotation strata.dev/flavor), which ClusterQueue "cq" does not have`},
				"w2": onOther,
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := []client.Object{tc.queue}
			for _, wl := range tc.workloads {
				objs = append(objs, wl)
			}
			e := newSchedEnv(t, objs, twoFlavors, []*corev1.Node{tasNode("r1-n1", "r1", "4"), otherNode("r2-n1", "r2", "8")}, interceptor.Funcs{})
			if err := e.s.Schedule(t.Context()); err != nil {
				t.Fatalf("Schedule(): %v", err)
			}
			if diff := cmp.Diff(tc.want, withoutMessages(e.outcomes(t), tc.want)); diff != "" {
				t.Errorf("outcomes (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestSchedulePinnedFlavorAddedToQueue: a workload Inadmissible because its
// queue lacks its pinned flavor is admitted on that flavor once the
// ClusterQueue lists it; the ClusterQueue's event brings the pass.
func TestSchedulePinnedFlavorAddedToQueue(t *testing.T) {
	objs := []client.Object{testutil.MakeClusterQueue("cq").Flavor("other").Obj(), pinnedTo(job("w", "cq", 1, nil, 0), "tas-flavor")}
	e := newSchedEnv(t, objs, twoFlavors, []*corev1.Node{tasNode("r1-n1", "r1", "4"), otherNode("r2-n1", "r2", "8")}, interceptor.Funcs{})
	if err := e.s.Schedule(t.Context()); err != nil {
		t.Fatalf("Schedule(): %v", err)
	}
	if got := e.outcomes(t)["w"].Reason; got != ReasonInadmissible {
		t.Fatalf("before the ClusterQueue has the flavor: reason %q, want %q", got, ReasonInadmissible)
	}
	e.informed(t) // the Inadmissible condition's write
	var cq strata.ClusterQueue
	if err := e.c.Get(t.Context(), types.NamespacedName{Name: "cq"}, &cq); err != nil {
		t.Fatal(err)
	}
	cq.Spec.Flavors = testutil.MakeClusterQueue("cq").Flavor("other").Flavor("tas-flavor").Obj().Spec.Flavors
	if err := e.c.Update(t.Context(), &cq); err != nil {
		t.Fatal(err)
	}
	clear(e.s.queueStatusAt)
	if err := e.s.Schedule(t.Context()); err != nil {
		t.Fatalf("Schedule(): %v", err)
	}
	if diff := cmp.Diff(map[string]outcome{"w": admitted}, withoutMessages(e.outcomes(t), nil)); diff != "" {
		t.Errorf("outcomes once the ClusterQueue has the flavor (-want,+got):\n%s", diff)
	}
}

// podsReadyOn is waitForPodsReady on, with blockAdmission as given.
func podsReadyOn(block bool) configv1beta1.WaitForPodsReady {
	cfg := &configv1beta1.AgentConfiguration{}
	config.SetAgentDefaults(cfg)
	cfg.WaitForPodsReady.BlockAdmission = ptr.To(block)
	return cfg.WaitForPodsReady
}

// TestScheduleBlockAdmission: under waitForPodsReady's blockAdmission, a
// pass admits one workload, and none while an admitted one's pods are not
// all ready (Kueue's).
func TestScheduleBlockAdmission(t *testing.T) {
	cq := testutil.MakeClusterQueue("a").Flavor("tas-flavor").Obj()
	e := newSchedEnv(t, []client.Object{cq, job("a1", "a", 1, nil, 0), job("a2", "a", 1, nil, 1)}, nil,
		[]*corev1.Node{tasNode("r1-n1", "r1", "4")}, interceptor.Funcs{})
	clk := testingclock.NewFakeClock(created)
	e.s.WithPodsReady(podsReadyOn(true), clk)
	waiting := outcome{Reason: strata.WaitingForPodsReady}
	pass := func(want map[string]outcome) {
		t.Helper()
		if err := e.s.Schedule(t.Context()); err != nil {
			t.Fatalf("Schedule(): %v", err)
		}
		if diff := cmp.Diff(want, withoutMessages(e.outcomes(t), want)); diff != "" {
			t.Errorf("outcomes (-want,+got):\n%s", diff)
		}
		e.informed(t)
	}

	// Both fit: the older is admitted, the other waits.
	pass(map[string]outcome{"a1": admitted, "a2": waiting})
	var a1 strata.Workload
	if err := e.c.Get(t.Context(), types.NamespacedName{Namespace: "ns", Name: "a1"}, &a1); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(a1.Status.Conditions, strata.WorkloadPodsReady); c == nil || c.Status != metav1.ConditionFalse ||
		c.Reason != strata.PodsReadyWaitForStart || !c.LastTransitionTime.Time.Equal(created) {
		t.Errorf("the admission's PodsReady = %+v, want False, WaitForStart, at the clock's time", c)
	}
	// The admitted one's pods are not ready: nothing else is admitted.
	pass(map[string]outcome{"a1": admitted, "a2": waiting})
	// They are: the next one is.
	meta.SetStatusCondition(&a1.Status.Conditions, metav1.Condition{Type: strata.WorkloadPodsReady, Status: metav1.ConditionTrue, Reason: strata.PodsReadyStarted})
	if err := e.c.Status().Update(t.Context(), &a1); err != nil {
		t.Fatal(err)
	}
	e.informed(t)
	pass(map[string]outcome{"a1": admitted, "a2": admitted})
}

// TestScheduleRequeueBackoff: a workload evicted because its pods were not
// ready in time waits until its requeueAt, and those behind it go ahead,
// also in a StrictFIFO queue.
func TestScheduleRequeueBackoff(t *testing.T) {
	backoff := func(wl *strata.Workload, at time.Time) *strata.Workload {
		wl.Status.RequeueState = &strata.RequeueState{Count: ptr.To[int32](2), RequeueAt: ptr.To(metav1.NewTime(at))}
		return wl
	}
	cases := map[string]struct {
		now  time.Time
		want map[string]outcome
	}{
		"before requeueAt: it waits, the one behind is admitted": {
			now: created.Add(time.Minute),
			want: map[string]outcome{
				"a1": {Reason: strata.EvictedByPodsReadyTimeout, Message: "evicted 2 time(s) because its pods were not ready in time (waitForPodsReady); it queues again at 2025-03-01T12:02:00Z"},
				"a2": admitted,
			},
		},
		"after requeueAt: it is the head again": {
			now:  created.Add(3 * time.Minute),
			want: map[string]outcome{"a1": admitted, "a2": pending},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cq := strictFIFO(testutil.MakeClusterQueue("a").Flavor("tas-flavor").Obj())
			e := newSchedEnv(t, []client.Object{cq, backoff(job("a1", "a", 3, nil, 0), created.Add(2*time.Minute)), job("a2", "a", 3, nil, 1)}, nil,
				[]*corev1.Node{tasNode("r1-n1", "r1", "4")}, interceptor.Funcs{})
			e.s.WithPodsReady(podsReadyOn(false), testingclock.NewFakeClock(tc.now))
			if err := e.s.Schedule(t.Context()); err != nil {
				t.Fatalf("Schedule(): %v", err)
			}
			if diff := cmp.Diff(tc.want, withoutMessages(e.outcomes(t), tc.want)); diff != "" {
				t.Errorf("outcomes (-want,+got):\n%s", diff)
			}
		})
	}
}

func withChecks(cq *strata.ClusterQueue, checks ...string) *strata.ClusterQueue {
	cq.Spec.AdmissionChecks = checks
	return cq
}

func stopped(cq *strata.ClusterQueue) *strata.ClusterQueue {
	cq.Spec.StopPolicy = ptr.To(strata.StopPolicy("Hold"))
	return cq
}

// TestScheduleRoundNomination: as in Kueue's scheduling cycle, a head
// nominated, as its round began, on a flavor an earlier head of the round
// then takes is not walked to another flavor; it is served again first in
// the next round, where it competes again. Here b1 (borrowing) was
// nominated on tas-flavor, which a1 takes; in the next round a2, which
// needs no borrowing, comes first and takes other: b1 waits. (Walking b1
// to other at once, as before, left a2 out of its own queue's quota.)
func TestScheduleRoundNomination(t *testing.T) {
	a := testutil.MakeClusterQueue("a").Cohort("c").Flavor("tas-flavor", "cpu", "4").Flavor("other", "cpu", "4").Obj()
	b := testutil.MakeClusterQueue("b").Cohort("c").Flavor("tas-flavor", "cpu", "0").Flavor("other", "cpu", "0").Obj()
	objs := []client.Object{a, b, job("a1", "a", 4, nil, 0), job("a2", "a", 4, nil, 2), job("b1", "b", 4, nil, 1)}
	e := newSchedEnv(t, objs, twoFlavors, []*corev1.Node{tasNode("r1-n1", "r1", "4"), otherNode("r2-n1", "r2", "8")}, interceptor.Funcs{})
	if err := e.s.Schedule(t.Context()); err != nil {
		t.Fatalf("Schedule(): %v", err)
	}
	want := map[string]outcome{
		"a1": admitted,
		"a2": {Reason: ReasonAdmitted, Flavor: "other"},
		"b1": {Reason: ReasonPending},
	}
	if diff := cmp.Diff(want, withoutMessages(e.outcomes(t), want)); diff != "" {
		t.Errorf("outcomes (-want,+got):\n%s", diff)
	}
}

// TestScheduleAdmissionFairSharing checks Kueue's admission fair sharing:
// in a ClusterQueue whose admissionScope asks for it, the workloads of
// the LocalQueue that consumed the least come first, before priority and
// age, and a workload admitted in a pass counts against its LocalQueue
// for the rest of the pass.
func TestScheduleAdmissionFairSharing(t *testing.T) {
	fairQueue := func() *strata.ClusterQueue {
		cq := testutil.MakeClusterQueue("cq").Flavor("tas-flavor").Obj()
		cq.Spec.AdmissionScope = &strata.AdmissionScope{AdmissionMode: strata.UsageBasedAdmissionFairSharing}
		return cq
	}
	lq := func(name string, used corev1.ResourceList, weight string) *strata.LocalQueue {
		q := testutil.MakeLocalQueue(name, "ns", "cq")
		if used != nil {
			q.Status.FairSharing = &strata.LocalQueueFairSharingStatus{AdmissionFairSharingStatus: &strata.AdmissionFairSharingStatus{
				ConsumedResources: used, LastUpdate: metav1.NewTime(created)}}
		}
		if weight != "" {
			q.Spec.FairSharing = &strata.FairSharing{Weight: ptr.To(resource.MustParse(weight))}
		}
		return q
	}
	afs := &configv1beta1.AdmissionFairSharing{UsageSamplingInterval: &metav1.Duration{Duration: time.Minute}}
	cases := map[string]struct {
		afs       *configv1beta1.AdmissionFairSharing
		queue     *strata.ClusterQueue
		lqs       []*strata.LocalQueue
		workloads []*strata.Workload
		rackCPU   string
		want      map[string]outcome
	}{
		"the LocalQueue that consumed less first, whatever the priority": {
			afs: afs, queue: fairQueue(),
			lqs:       []*strata.LocalQueue{lq("a", rl("cpu", "10"), ""), lq("b", rl("cpu", "1"), "")},
			workloads: []*strata.Workload{job("a1", "a", 2, ptr.To[int32](100), 0), job("b1", "b", 2, nil, 5)},
			rackCPU:   "2",
			want:      map[string]outcome{"a1": pending, "b1": admitted},
		},
		"without admissionScope: priority first": {
			afs: afs, queue: testutil.MakeClusterQueue("cq").Flavor("tas-flavor").Obj(),
			lqs:       []*strata.LocalQueue{lq("a", rl("cpu", "10"), ""), lq("b", rl("cpu", "1"), "")},
			workloads: []*strata.Workload{job("a1", "a", 2, ptr.To[int32](100), 0), job("b1", "b", 2, nil, 5)},
			rackCPU:   "2",
			want:      map[string]outcome{"a1": admitted, "b1": pending},
		},
		"admission fair sharing not configured: admissionScope is ignored": {
			queue:     fairQueue(),
			lqs:       []*strata.LocalQueue{lq("a", rl("cpu", "10"), ""), lq("b", rl("cpu", "1"), "")},
			workloads: []*strata.Workload{job("a1", "a", 2, ptr.To[int32](100), 0), job("b1", "b", 2, nil, 5)},
			rackCPU:   "2",
			want:      map[string]outcome{"a1": admitted, "b1": pending},
		},
		"a LocalQueue's weight divides its usage": {
			afs: afs, queue: fairQueue(),
			lqs:       []*strata.LocalQueue{lq("a", rl("cpu", "10"), "4"), lq("b", rl("cpu", "3"), "")},
			workloads: []*strata.Workload{job("a1", "a", 2, nil, 5), job("b1", "b", 2, nil, 0)},
			rackCPU:   "2",
			want:      map[string]outcome{"a1": admitted, "b1": pending},
		},
		"resource weights: a resource of weight 0 does not count": {
			afs: &configv1beta1.AdmissionFairSharing{UsageSamplingInterval: &metav1.Duration{Duration: time.Minute},
				ResourceWeights: map[corev1.ResourceName]float64{corev1.ResourceMemory: 0}},
			queue:     fairQueue(),
			lqs:       []*strata.LocalQueue{lq("a", rl("memory", "100Gi"), ""), lq("b", rl("cpu", "1"), "")},
			workloads: []*strata.Workload{job("a1", "a", 2, nil, 5), job("b1", "b", 2, nil, 0)},
			rackCPU:   "2",
			want:      map[string]outcome{"a1": admitted, "b1": pending},
		},
		"an admission counts against its LocalQueue for the rest of the pass": {
			afs: afs, queue: fairQueue(),
			lqs: []*strata.LocalQueue{lq("a", nil, ""), lq("b", nil, "")},
			workloads: []*strata.Workload{
				job("a1", "a", 2, nil, 0), job("a2", "a", 2, nil, 1), job("b1", "b", 2, nil, 2),
			},
			rackCPU: "4",
			want:    map[string]outcome{"a1": admitted, "a2": pending, "b1": admitted},
		},
		"without admission fair sharing, the same queue by age": {
			queue: fairQueue(),
			lqs:   []*strata.LocalQueue{lq("a", nil, ""), lq("b", nil, "")},
			workloads: []*strata.Workload{
				job("a1", "a", 2, nil, 0), job("a2", "a", 2, nil, 1), job("b1", "b", 2, nil, 2),
			},
			rackCPU: "4",
			want:    map[string]outcome{"a1": admitted, "a2": admitted, "b1": pending},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := []client.Object{tc.queue}
			for _, q := range tc.lqs {
				objs = append(objs, q)
			}
			for _, wl := range tc.workloads {
				objs = append(objs, wl)
			}
			e := newSchedEnv(t, objs, nil, []*corev1.Node{tasNode("r1-n1", "r1", tc.rackCPU)}, interceptor.Funcs{})
			e.s.WithAdmissionFairSharing(queue.NewAdmissionFairSharing(tc.afs))
			if err := e.s.Schedule(t.Context()); err != nil {
				t.Fatalf("Schedule(): %v", err)
			}
			if diff := cmp.Diff(tc.want, withoutMessages(e.outcomes(t), tc.want)); diff != "" {
				t.Errorf("outcomes (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestSchedulePerPodSetFlavors: each pod set (or PodSet group) of a
// workload takes its own flavor, as Kueue's flavor assigner gives it: the
// first of its queue's flavors where its quota and topology hold it,
// after the pod sets before it.
func TestSchedulePerPodSetFlavors(t *testing.T) {
	twoPodSets := func(name string, first, second int32, group bool) *strata.Workload {
		wl := job(name, "cq", first, nil, 0)
		ps := testutil.MakePodSet("second", second, "cpu", "1").Required(rackLabel).Obj()
		wl.Spec.PodSets = append(wl.Spec.PodSets, ps)
		if group {
			for i := range wl.Spec.PodSets {
				wl.Spec.PodSets[i].TopologyRequest.PodSetGroupName = ptr.To("g")
			}
		}
		return wl
	}
	type placed map[string]string // pod set → flavor
	cases := map[string]struct {
		queue   *strata.ClusterQueue
		wl      *strata.Workload
		want    placed
		message string
		// next: the flavor a workload of 2 pods in a rack, queued after
		// it, is admitted on ("": none queued).
		next string
		// pins: the hub's strata.dev/pod-set-flavors on the copy.
		pins string
	}{
		"both fit on the first flavor": {
			queue: testutil.MakeClusterQueue("cq").Flavor("tas-flavor").Flavor("other").Obj(),
			wl:    twoPodSets("w", 2, 2, false),
			want:  placed{"main": "tas-flavor", "second": "tas-flavor"},
		},
		"the second pod set on the next flavor, where both would also fit": {
			queue:   testutil.MakeClusterQueue("cq").Flavor("tas-flavor").Flavor("other").Obj(),
			wl:      twoPodSets("w", 3, 3, false),
			want:    placed{"main": "tas-flavor", "second": "other"},
			message: "admitted by ClusterQueue cq on flavors tas-flavor (pod set main), other (pod set second)",
			next:    "other",
		},
		"the second pod set on the next flavor: the first flavor's quota is full": {
			queue: testutil.MakeClusterQueue("cq").Flavor("tas-flavor", "cpu", "3").Flavor("other").Obj(),
			wl:    twoPodSets("w", 3, 1, false),
			want:  placed{"main": "tas-flavor", "second": "other"},
		},
		"a PodSet group stays on one flavor": {
			queue: testutil.MakeClusterQueue("cq").Flavor("tas-flavor").Flavor("other").Obj(),
			wl:    twoPodSets("w", 3, 3, true),
			want:  placed{"main": "other", "second": "other"},
		},
		"pinned by the hub: each pod set on its own flavor, though both fit on the first": {
			queue:   testutil.MakeClusterQueue("cq").Flavor("tas-flavor").Flavor("other").Obj(),
			wl:      twoPodSets("w", 2, 2, false),
			pins:    "main=other,second=tas-flavor",
			want:    placed{"main": "other", "second": "tas-flavor"},
			message: "admitted by ClusterQueue cq on flavors other (pod set main), tas-flavor (pod set second)",
		},
		"pinned by the hub, both pod sets to the second flavor": {
			queue: testutil.MakeClusterQueue("cq").Flavor("tas-flavor").Flavor("other").Obj(),
			wl:    twoPodSets("w", 2, 2, false),
			pins:  "second=other,main=other",
			want:  placed{"main": "other", "second": "other"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.pins != "" {
				metav1.SetMetaDataAnnotation(&tc.wl.ObjectMeta, strata.PodSetFlavorsAnnotation, tc.pins)
			}
			objs := []client.Object{tc.queue, tc.wl}
			if tc.next != "" {
				objs = append(objs, job("next", "cq", 2, nil, 1))
			}
			e := newSchedEnv(t, objs, twoFlavors, []*corev1.Node{tasNode("r1-n1", "r1", "4"), otherNode("r2-n1", "r2", "8")}, interceptor.Funcs{})
			if err := e.s.Schedule(t.Context()); err != nil {
				t.Fatalf("Schedule(): %v", err)
			}
			e.settle()
			var got strata.Workload
			if err := e.c.Get(t.Context(), client.ObjectKeyFromObject(tc.wl), &got); err != nil {
				t.Fatal(err)
			}
			if got.Status.Admission == nil {
				t.Fatalf("not admitted: %v", got.Status.Conditions)
			}
			gotPlaced := placed{}
			for _, psa := range got.Status.Admission.PodSetAssignments {
				gotPlaced[psa.Name] = psa.Flavor
			}
			if diff := cmp.Diff(tc.want, gotPlaced); diff != "" {
				t.Errorf("flavors (-want,+got):\n%s", diff)
			}
			if c := meta.FindStatusCondition(got.Status.Conditions, strata.WorkloadAdmitted); tc.message != "" && (c == nil || c.Message != tc.message) {
				t.Errorf("Admitted condition %v, want message %q", c, tc.message)
			}
			if tc.next != "" {
				// The cache holds each pod set on its flavor: the next
				// workload goes where room is left.
				if got := e.outcomes(t)["next"].Flavor; got != tc.next {
					t.Errorf("the next workload admitted on %q, want %q", got, tc.next)
				}
			}
		})
	}
}

// TestScheduleSplitOnlyIsNotInadmissible: a workload that no one flavor's
// quota can ever hold, but whose pod sets each fit one flavor's quota,
// waits for room (Pending), not Inadmissible.
func TestScheduleSplitOnlyIsNotInadmissible(t *testing.T) {
	wl := job("w", "cq", 3, nil, 1)
	wl.Spec.PodSets = append(wl.Spec.PodSets, testutil.MakePodSet("second", 3, "cpu", "1").Required(rackLabel).Obj())
	// blocker holds 2 of tas-flavor's 4 CPUs of quota.
	blocker := job("blocker", "cq", 2, nil, 0)
	queueObj := testutil.MakeClusterQueue("cq").Flavor("tas-flavor", "cpu", "4").Flavor("other", "cpu", "4").Obj()
	e := newSchedEnv(t, []client.Object{queueObj, blocker, wl}, twoFlavors, []*corev1.Node{tasNode("r1-n1", "r1", "4"), otherNode("r2-n1", "r2", "8")}, interceptor.Funcs{})
	if err := e.s.Schedule(t.Context()); err != nil {
		t.Fatalf("Schedule(): %v", err)
	}
	got := e.outcomes(t)["w"]
	if got.Reason != ReasonPending || !strings.Contains(got.Message, "its pod sets may be admitted on different flavors once each has room") {
		t.Errorf("outcome %+v, want Pending, waiting for room on different flavors", got)
	}
}

// TestSkippedHeadAdmittedInTheSamePass: a head the round skips (its
// nomination's quota taken by an earlier head of the round) and admits in
// the next round of the same pass keeps that admission. Its waiting
// reason used to be written at the skip, and the admission, written from
// the pass's older copy of the Workload, then conflicted and was given
// back.
func TestSkippedHeadAdmittedInTheSamePass(t *testing.T) {
	a := testutil.MakeClusterQueue("a").ResourceGroup("cpu").GroupFlavor("tas-flavor", "0").GroupFlavor("other", "4").Cohort("c").Obj()
	b := testutil.MakeClusterQueue("b").ResourceGroup("cpu").GroupFlavor("tas-flavor", "4").Cohort("c").Obj()
	e := newSchedEnv(t, []client.Object{a, b, job("wa", "a", 4, nil, 0), job("wb", "b", 4, nil, 1)}, twoFlavors,
		[]*corev1.Node{tasNode("r1-n1", "r1", "8"), otherNode("r2-n1", "r2", "4")}, interceptor.Funcs{})
	if err := e.s.Schedule(t.Context()); err != nil {
		t.Fatalf("Schedule(): %v", err)
	}
	got := e.outcomes(t)
	want := map[string]outcome{"wa": {Reason: ReasonAdmitted, Flavor: "other"}, "wb": {Reason: ReasonAdmitted, Flavor: "tas-flavor"}}
	if diff := cmp.Diff(want, withoutMessages(got, want)); diff != "" {
		t.Errorf("after one pass (-want,+got):\n%s", diff)
	}
}
