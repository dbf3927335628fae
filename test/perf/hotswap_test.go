package perf

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/agent/controller/jobs"
	"strata.dev/strata/agent/controller/nodefailure"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/scheme"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/test/integration/framework"
)

// BenchmarkHotSwap measures hot swap with replace-on-pod-termination on a
// real API server (envtest) and the agent in-process: per op, one running
// rack-required workload loses a node — its pod there fails, then the node
// goes NotReady — and the time runs from that NotReady write (the moment
// the trigger is observable) until the harness's watch sees the new
// assignment. Each rack (16 nodes, 8 CPUs) holds one 15-pod workload and
// one spare node. Run with `make bench-hotswap` (-benchtime 1x: the
// failures are counted by STRATA_HOTSWAP_FAILURES, default 50).
func BenchmarkHotSwap(b *testing.B) {
	ctx := context.Background()
	clusters, err := framework.Start(framework.ClusterSpec{Name: "hotswap", Role: framework.Worker})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := clusters.Stop(); err != nil {
			b.Error(err)
		}
	}()
	kube := clusters.Get("hotswap").Client
	cfg := clusters.Get("hotswap").Config
	racks := envInt("STRATA_HOTSWAP_FAILURES", 50) // one node failure per rack
	b.Logf("creating %d racks of 16 nodes", racks)
	if err := parallel(racks*16, 16, func(i int) error {
		name := fmt.Sprintf("hs-%04d", i)
		return createReadyNode(ctx, kube, node(name, map[string]string{
			"pool": "hs", block: fmt.Sprintf("block-%d", i/256), rack: fmt.Sprintf("rack-%d", i/16), host: name,
		}, "8"))
	}); err != nil {
		b.Fatal(err)
	}
	for _, o := range []client.Object{
		testutil.MakeTopology("hs", block, rack, host).Obj(),
		testutil.MakeResourceFlavor("hs").NodeLabel("pool", "hs").TopologyName("hs").Obj(),
		testutil.MakeClusterQueue("hs").Flavor("hs").Obj(),
		testutil.MakeLocalQueue("hs", "default", "hs"),
	} {
		if err := kube.Create(ctx, o); err != nil {
			b.Fatal(err)
		}
	}

	watch, err := crcache.New(cfg, crcache.Options{Scheme: scheme.New()})
	if err != nil {
		b.Fatal(err)
	}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	var mu sync.Mutex
	hostsOf := map[string][]string{} // workload -> hosts of its assignment
	changed := map[string]chan struct{}{}
	trigger := map[string]string{} // workload -> NodeReplacement message of its replacement
	inf, err := watch.GetInformer(wctx, &strata.Workload{})
	if err != nil {
		b.Fatal(err)
	}
	onWorkload := func(o any) {
		wl, ok := o.(*strata.Workload)
		if !ok || wl.Status.Admission == nil {
			return
		}
		a, err := tas.Decode(wl.Status.Admission.PodSetAssignments[0].TopologyAssignment)
		if err != nil {
			return
		}
		var hosts []string
		for _, d := range a.Domains {
			hosts = append(hosts, d.Values[len(d.Values)-1])
		}
		mu.Lock()
		defer mu.Unlock()
		if old := hostsOf[wl.Name]; old != nil && !slices.Equal(old, hosts) && changed[wl.Name] != nil {
			if c := meta.FindStatusCondition(wl.Status.Conditions, nodefailure.ConditionNodeReplacement); c != nil {
				trigger[wl.Name] = c.Message
			}
			close(changed[wl.Name])
			delete(changed, wl.Name)
		}
		hostsOf[wl.Name] = hosts
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: onWorkload, UpdateFunc: func(_, o any) { onWorkload(o) }}); err != nil {
		b.Fatal(err)
	}
	go func() { _ = watch.Start(wctx) }()
	watch.WaitForCacheSync(wctx)

	stop := startAgent(b, cfg)
	defer stop()

	b.Logf("admitting %d rack-required workloads of 15 pods x 8 CPUs, one per rack", racks)
	owners := make([]metav1.OwnerReference, racks)
	for i := range racks {
		j := job(fmt.Sprintf("hs-%04d", i))
		j.Labels[strata.QueueNameLabel] = "hs"
		j.Spec.Parallelism, j.Spec.Completions = ptr.To[int32](15), ptr.To[int32](15)
		j.Spec.Suspend = ptr.To(true) // no admission policy on this API server
		j.Spec.Template.Annotations = map[string]string{"strata.dev/podset-required-topology": rack}
		j.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("8")
		if err := kube.Create(ctx, j); err != nil {
			b.Fatal(err)
		}
		// The agent acts only on pods its workload's owner controls, as a
		// real Job's pods are; the harness's failed pod must be one.
		owners[i] = *metav1.NewControllerRef(j, batchv1.SchemeGroupVersion.WithKind("Job"))
	}
	waitFor(b, 5*time.Minute, "every workload admitted", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(hostsOf) == racks, nil
	})

	lat := make([]time.Duration, 0, racks)
	b.ResetTimer()
	for i := range racks {
		name := jobs.WorkloadName(fmt.Sprintf("hs-%04d", i))
		mu.Lock()
		failed := hostsOf[name][0]
		done := make(chan struct{})
		changed[name] = done
		mu.Unlock()

		// The workload's pod on the node has failed...
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("hs-%04d-0", i), Namespace: "default", OwnerReferences: []metav1.OwnerReference{owners[i]}, Labels: map[string]string{
				strata.WorkloadLabel: name, strata.PodSetLabel: "main", strata.TASLabel: "true", batchv1.JobNameLabel: fmt.Sprintf("hs-%04d", i),
			}},
			Spec: corev1.PodSpec{NodeName: failed, Containers: []corev1.Container{{Name: "c", Image: "fake"}}},
		}
		if err := kube.Create(ctx, p); err != nil {
			b.Fatal(err)
		}
		p.Status.Phase = corev1.PodFailed
		if err := kube.Status().Update(ctx, p); err != nil {
			b.Fatal(err)
		}
		// ...and the node goes NotReady: from here the failure is observable.
		var n corev1.Node
		if err := kube.Get(ctx, client.ObjectKey{Name: failed}, &n); err != nil {
			b.Fatal(err)
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now(), LastHeartbeatTime: metav1.Now()}}
		if err := kube.Status().Update(ctx, &n); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		select {
		case <-done:
			lat = append(lat, time.Since(start))
		case <-time.After(time.Minute):
			b.Fatalf("workload %s: node %s not replaced within a minute", name, failed)
		}
		// The path measured must be replace-on-pod-termination, not the
		// notReadyDelay that follows it when the agent ignores the pod.
		mu.Lock()
		msg := trigger[name]
		mu.Unlock()
		if !strings.Contains(msg, "("+nodefailure.ReasonPodsTerminated+")") {
			b.Fatalf("workload %s: node %s was replaced, but not on pod termination: NodeReplacement says %q", name, failed, msg)
		}
	}
	b.StopTimer()
	b.ReportMetric(pct(lat, 50).Seconds()*1000, "p50-ms")
	b.ReportMetric(pct(lat, 90).Seconds()*1000, "p90-ms")
	b.ReportMetric(pct(lat, 100).Seconds()*1000, "max-ms")
	b.Logf("%d node failures: trigger observable -> new assignment seen: p50 %s, p90 %s, max %s", len(lat),
		pct(lat, 50).Round(time.Millisecond), pct(lat, 90).Round(time.Millisecond), pct(lat, 100).Round(time.Millisecond))
}
