package kubectlstrata

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
)

var (
	now     = time.Date(2026, 11, 24, 16, 0, 0, 0, time.UTC)
	minutes = func(m int) *metav1.Time { t := metav1.NewTime(now.Add(-time.Duration(m) * time.Minute)); return &t }
)

func cond(t string, status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: t, Status: status, Reason: reason, Message: message}
}

// workerCluster is a WorkerCluster with status.
func workerCluster(name string, cordoned bool, copies int32, summaries []strata.WorkerSummaryStatus, conds ...metav1.Condition) strata.WorkerCluster {
	wc := testutil.MakeWorkerCluster(name).KubeConfigSecret("strata-system", name).Obj()
	wc.Spec.Unschedulable = cordoned
	wc.Status = strata.WorkerClusterStatus{Conditions: conds, Summaries: summaries, Workloads: copies}
	return *wc
}

// hubWorkload is a hub Workload placed on cluster ("" for none).
func hubWorkload(name, cluster string, conds ...metav1.Condition) strata.Workload {
	wl := testutil.MakeWorkload(name, "ml").Queue("team-a").Obj()
	wl.Status.Conditions = conds
	if cluster != "" {
		wl.Status.Placement = &strata.Placement{Cluster: cluster, Flavor: "gpu", DispatchGeneration: 1}
	}
	return *wl
}

func TestNewClustersView(t *testing.T) {
	connected := cond(strata.WorkerClusterConnected, metav1.ConditionTrue, "Connected", "connected to https://w1")
	fresh := cond(strata.WorkerClusterSummariesFresh, metav1.ConditionTrue, "Fresh", "")
	admitted := cond(strata.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", "")
	dispatched := cond(strata.WorkloadAdmitted, metav1.ConditionFalse, "Dispatched", "waiting for w1")
	pending := cond(strata.WorkloadAdmitted, metav1.ConditionFalse, "Pending", "fits nowhere now")
	finished := cond(strata.WorkloadFinished, metav1.ConditionTrue, "Succeeded", "")
	invalid := cond(strata.WorkloadInvalid, metav1.ConditionTrue, "LocalQueueNotFound", "")
	unknown := ConditionView{Status: metav1.ConditionUnknown}
	cases := map[string]struct {
		wcs  []strata.WorkerCluster
		wls  []strata.Workload
		want ClustersView
	}{
		"an empty hub": {
			want: ClustersView{Clusters: []ClusterView{}},
		},
		"workers by name, workloads counted where they are": {
			wcs: []strata.WorkerCluster{
				workerCluster("w2", true, 0, nil,
					cond(strata.WorkerClusterConnected, metav1.ConditionFalse, "Unreachable", "dial tcp: connection refused"),
					cond(strata.WorkerClusterSummariesFresh, metav1.ConditionUnknown, "NotConnected", "")),
				workerCluster("w1", false, 3, []strata.WorkerSummaryStatus{
					{Flavor: "gpu", SummaryGeneration: 7, ObservedTime: minutes(1)},
					{Flavor: "cpu", SummaryGeneration: 2, ObservedTime: minutes(3)},
				}, connected, fresh),
			},
			wls: []strata.Workload{
				hubWorkload("a", "w1", admitted),
				hubWorkload("b", "w1", admitted),
				hubWorkload("c", "w1", dispatched),
				hubWorkload("done", "w1", admitted, finished),
				hubWorkload("d", "", pending),
				hubWorkload("e", "", pending),
				hubWorkload("f", "", invalid),
				hubWorkload("g", ""),
			},
			want: ClustersView{
				Clusters: []ClusterView{
					{
						Name: "w1", Registered: true,
						Connected:      ConditionView{Status: metav1.ConditionTrue, Reason: "Connected", Message: "connected to https://w1"},
						SummariesFresh: ConditionView{Status: metav1.ConditionTrue, Reason: "Fresh"},
						Copies:         3, Admitted: 2, Waiting: 1,
						Summaries: []SummaryStatusView{
							{Flavor: "cpu", Generation: 2, ObservedTime: minutes(3)},
							{Flavor: "gpu", Generation: 7, ObservedTime: minutes(1)},
						},
					},
					{
						Name: "w2", Registered: true, Cordoned: true,
						Connected:      ConditionView{Status: metav1.ConditionFalse, Reason: "Unreachable", Message: "dial tcp: connection refused"},
						SummariesFresh: ConditionView{Status: metav1.ConditionUnknown, Reason: "NotConnected"},
					},
				},
				NotDispatched: NotDispatchedView{Total: 4, ByReason: map[string]int32{"Pending": 2, "Invalid": 1, "New": 1}},
			},
		},
		"workloads on a cluster without a WorkerCluster": {
			wcs: []strata.WorkerCluster{workerCluster("w1", false, 0, nil)},
			wls: []strata.Workload{hubWorkload("a", "gone", admitted), hubWorkload("b", "gone", dispatched)},
			want: ClustersView{Clusters: []ClusterView{
				{Name: "w1", Registered: true, Connected: unknown, SummariesFresh: unknown},
				{Name: "gone", Connected: unknown, SummariesFresh: unknown, Admitted: 1, Waiting: 1},
			}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := newClustersView(tc.wcs, tc.wls)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("newClustersView (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestWriteClustersTable(t *testing.T) {
	longMessage := "Get \"https://w2.example:6443/apis/strata.dev/v1beta1/capacitysummaries\": dial tcp 10.0.0.2:6443: connect: connection refused"
	cases := map[string]struct {
		view ClustersView
		want string
	}{
		"no workers": {
			view: ClustersView{Clusters: []ClusterView{}},
			want: "No WorkerClusters on this hub: register the workers (see docs/hub.md).\n" +
				"Not dispatched: none\n",
		},
		"workers, problems and waiting workloads": {
			view: ClustersView{
				Clusters: []ClusterView{
					{
						Name: "w1", Registered: true,
						Connected:      ConditionView{Status: metav1.ConditionTrue, Reason: "Connected", Message: "connected"},
						SummariesFresh: ConditionView{Status: metav1.ConditionTrue, Reason: "Fresh"},
						Copies:         3, Admitted: 2, Waiting: 1,
						Summaries: []SummaryStatusView{
							{Flavor: "cpu", Generation: 2, ObservedTime: minutes(3)},
							{Flavor: "gpu", Generation: 7, ObservedTime: minutes(1)},
						},
					},
					{
						Name: "w2", Registered: true, Cordoned: true,
						Connected:      ConditionView{Status: metav1.ConditionFalse, Reason: "Unreachable", Message: longMessage},
						SummariesFresh: ConditionView{Status: metav1.ConditionUnknown, Reason: "NotConnected", Message: "not connected"},
						Dispatching:    &ConditionView{Status: metav1.ConditionFalse, Reason: "Forbidden", Message: "may not create jobs.batch in namespace ml on w2"},
					},
					{Name: "gone", Connected: ConditionView{Status: metav1.ConditionUnknown}, SummariesFresh: ConditionView{Status: metav1.ConditionUnknown}, Waiting: 1},
				},
				NotDispatched: NotDispatchedView{Total: 3, ByReason: map[string]int32{"Pending": 2, "Invalid": 1}},
			},
			//nolint:dupword // columns of a table repeat values
			want: `NAME  CONNECTED            FRESH                   CORDONED  COPIES  ADMITTED  WAITING  FLAVORS (SUMMARY AGE)
w1    True                 True                    false     3       2         1        cpu 3m, gpu 60s
w2    False (Unreachable)  Unknown (NotConnected)  true      0       0         0        -
gone  no WorkerCluster     -                       false     0       0         1        -

w2 Connected: Get "https://w2.example:6443/apis/strata.dev/v1beta1/capacitysummaries": dial tcp
    10.0.0.2:6443: connect: connection refused
w2 Dispatching: may not create jobs.batch in namespace ml on w2
gone: hub Workloads are recorded on it, but it has no WorkerCluster
Not dispatched: 3 hub Workloads (Invalid 1, Pending 2)
`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			if err := writeClustersTable(&out, tc.view, now); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, out.String()); diff != "" {
				t.Errorf("writeClustersTable (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestFreeLines(t *testing.T) {
	cs := []ClusterView{{Name: "w1", Summaries: []SummaryStatusView{{
		Flavor: "gpu",
		Free:   corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("120"), corev1.ResourceCPU: resource.MustParse("900")},
		LargestFree: []strata.DomainFree{
			{Level: "cloud.provider.com/topology-block", Domain: "b1", Resource: "nvidia.com/gpu", Free: resource.MustParse("64")},
			{Level: "cloud.provider.com/topology-rack", Domain: "b1/r2", Resource: "nvidia.com/gpu", Free: resource.MustParse("16")},
		},
	}, {
		Flavor:      "h100",
		Free:        corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")},
		Capacity:    corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("64")},
		LargestFree: []strata.DomainFree{{Level: "cloud.provider.com/topology-block", Domain: "b2", Resource: "nvidia.com/gpu", Free: resource.MustParse("8")}},
	}, {Flavor: "not-read-yet"}}}}
	want := []string{
		"  w1/gpu: 120 nvidia.com/gpu free; freest block b1 64, rack b1/r2 16",
		"  w1/h100: 8 of 64 nvidia.com/gpu free; freest block b2 8",
	}
	if diff := cmp.Diff(want, freeLines(cs)); diff != "" {
		t.Errorf("freeLines (-want,+got):\n%s", diff)
	}
}
