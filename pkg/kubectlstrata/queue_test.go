package kubectlstrata

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
)

func TestNewQueueView(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	wl := func(ns, name, lq string, prio int32, minute int) strata.Workload {
		w := testutil.MakeWorkload(name, ns).Queue(lq).Obj()
		w.Spec.Priority = ptr.To(prio)
		w.CreationTimestamp = metav1.NewTime(t0.Add(time.Duration(minute) * time.Minute))
		w.Status.Conditions = []metav1.Condition{{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: "Pending", Message: "waiting for capacity"}}
		return *w
	}
	admitted := wl("ml", "running", "a", 100, 0)
	admitted.Status.Admission = &strata.Admission{ClusterQueue: "cq"}
	dispatched := wl("ml", "sent", "a", 100, 0)
	dispatched.Status.Placement = &strata.Placement{Cluster: "w1"}
	finished := wl("ml", "done", "a", 100, 0)
	finished.Status.Conditions = []metav1.Condition{{Type: strata.WorkloadFinished, Status: metav1.ConditionTrue}}
	deactivated := wl("ml", "held", "a", 1000, 0)
	deactivated.Spec.Active = ptr.To(false)
	wls := []strata.Workload{
		wl("ml", "old-low", "a", 1, 1), wl("ml", "new-high", "a", 10, 5), wl("web", "mid", "b", 5, 2), wl("ml", "old-high", "a", 10, 3),
		wl("other", "elsewhere", "c", 99, 0), admitted, dispatched, finished, deactivated,
	}
	lqs := map[types.NamespacedName]*strata.LocalQueue{
		{Namespace: "ml", Name: "a"}:    testutil.MakeLocalQueue("a", "ml", "cq"),
		{Namespace: "web", Name: "b"}:   testutil.MakeLocalQueue("b", "web", "cq"),
		{Namespace: "other", Name: "c"}: testutil.MakeLocalQueue("c", "other", "other-cq"),
	}
	// Under admission fair sharing, ml/a consumed more than web/b (8 CPUs
	// against 1 CPU and 1 GPU), unless a GPU weighs more than 7.
	fair := testutil.MakeClusterQueue("cq").Obj()
	fair.Spec.AdmissionScope = &strata.AdmissionScope{AdmissionMode: strata.UsageBasedAdmissionFairSharing}
	used := map[types.NamespacedName]*strata.LocalQueue{}
	for k, lq := range lqs {
		lq = lq.DeepCopy()
		consumed := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(map[string]string{"a": "8", "b": "1", "c": "0"}[k.Name])}
		if k.Name == "b" {
			consumed["nvidia.com/gpu"] = resource.MustParse("1")
		}
		lq.Status.FairSharing = &strata.LocalQueueFairSharingStatus{AdmissionFairSharingStatus: &strata.AdmissionFairSharingStatus{ConsumedResources: consumed}}
		used[k] = lq
	}
	gpuHeavy := fairSharing{known: true, from: "ConfigMap strata-system/strata-agent-config",
		cfg: &configv1beta1.AdmissionFairSharing{ResourceWeights: map[corev1.ResourceName]float64{"nvidia.com/gpu": 10}}}
	names := func(v QueueView) []string {
		var out []string
		for _, p := range v.Pending {
			out = append(out, p.Namespace+"/"+p.Name+" "+string(rune('0'+p.Position))+"/"+string(rune('0'+p.LocalQueuePosition)))
		}
		return out
	}
	cases := map[string]struct {
		hub  bool
		only *types.NamespacedName
		cq   *strata.ClusterQueue
		lqs  map[types.NamespacedName]*strata.LocalQueue
		fs   fairSharing
		want []string
	}{
		"admission fair sharing, configuration unknown: the LocalQueue that consumed less first, each resource weighing 1": {
			cq: fair, lqs: used,
			want: []string{"web/mid 1/1", "ml/sent 2/1", "ml/old-high 3/2", "ml/new-high 4/3", "ml/old-low 5/4"},
		},
		"admission fair sharing with the configuration's resource weights: a GPU weighs 10": {
			cq: fair, lqs: used, fs: gpuHeavy,
			want: []string{"ml/sent 1/1", "ml/old-high 2/2", "ml/new-high 3/3", "ml/old-low 4/4", "web/mid 5/1"},
		},
		"a configuration without admission fair sharing: priority, then age, whatever the LocalQueues' status says": {
			cq: fair, lqs: used, fs: fairSharing{known: true, from: "ConfigMap strata-system/strata-agent-config"},
			want: []string{"ml/sent 1/1", "ml/old-high 2/2", "ml/new-high 3/3", "web/mid 4/1", "ml/old-low 5/4"},
		},
		"an admissionScope without usage in the LocalQueues' status (admission fair sharing off): priority, then age": {
			cq:   fair,
			want: []string{"ml/sent 1/1", "ml/old-high 2/2", "ml/new-high 3/3", "web/mid 4/1", "ml/old-low 5/4"},
		},
		"a worker's ClusterQueue: priority, then age; admitted, finished and deactivated ones are not pending": {
			// sent has a hub placement but no admission here: it waits.
			want: []string{"ml/sent 1/1", "ml/old-high 2/2", "ml/new-high 3/3", "web/mid 4/1", "ml/old-low 5/4"},
		},
		"on a hub a dispatched one is not pending, an admitted-looking one without a placement is": {
			hub:  true,
			want: []string{"ml/running 1/1", "ml/old-high 2/2", "ml/new-high 3/3", "web/mid 4/1", "ml/old-low 5/4"},
		},
		"one LocalQueue, with positions in both": {
			only: &types.NamespacedName{Namespace: "web", Name: "b"},
			want: []string{"web/mid 4/1"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.lqs == nil {
				tc.lqs = lqs
			}
			v := newQueueView("cq", tc.cq, tc.lqs, wls, tc.hub, tc.only, tc.fs)
			if diff := cmp.Diff(tc.want, names(v)); diff != "" {
				t.Errorf("pending (-want,+got):\n%s", diff)
			}
		})
	}
	v := newQueueView("cq", nil, lqs, wls, false, nil, fairSharing{})
	if at, of := positionOf(v, &wls[1]); at != 3 || of != 5 {
		t.Errorf("positionOf(new-high) = %d of %d, want 3 of 5", at, of)
	}
	var out bytes.Buffer
	if err := writeQueueTable(&out, newQueueView("cq", nil, lqs, wls, false, &types.NamespacedName{Namespace: "web", Name: "b"}, fairSharing{}), t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	want := `LocalQueue web/b of ClusterQueue cq (on the worker): 1 pending
POSITION  IN LOCALQUEUE  NAMESPACE  WORKLOAD  LOCALQUEUE  PRIORITY  AGE  REASON
4         1              web        mid       b           5         58m  Pending: waiting for capacity
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("table (-want,+got):\n%s", diff)
	}
	heads := map[fairSharing]string{}
	heads[gpuHeavy] = "ClusterQueue cq (on the worker): 5 pending; by LocalQueue usage first (admission fair sharing; " +
		"resource weights nvidia.com/gpu=10, others 1: ConfigMap strata-system/strata-agent-config)"
	unreadable := fairSharing{from: `the strata-agent configuration is not readable (ConfigMap strata-system/strata-agent-config: forbidden)`}
	heads[unreadable] = "ClusterQueue cq (on the worker): 5 pending; by LocalQueue usage first (admission fair sharing; " +
		"each resource weighing 1: the strata-agent configuration is not readable (ConfigMap strata-system/strata-agent-config: forbidden))"
	for fs, want := range heads {
		out.Reset()
		if err := writeQueueTable(&out, newQueueView("cq", fair, used, wls, false, nil, fs), t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if got, _, _ := strings.Cut(out.String(), "\n"); got != want {
			t.Errorf("header with %+v:\n got %s\nwant %s", fs, got, want)
		}
	}
}
