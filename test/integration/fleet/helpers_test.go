package fleet

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/pkg/workload"
	"strata.dev/strata/test/integration/framework"
)

const (
	rack     = "cloud.provider.com/topology-rack"
	host     = strata.HostnameLabel
	topology = "racks"
)

// registerWorker registers a worker with the hub through a kubeconfig
// Secret and waits until it is connected.
func registerWorker(ctx context.Context, name string, kubeconfig []byte) {
	GinkgoHelper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: hubCfg.Namespace, Name: name + "-kubeconfig"}, Data: map[string][]byte{"kubeconfig": kubeconfig}}
	Expect(hub.Client.Create(ctx, s)).To(Succeed())
	Expect(hub.Client.Create(ctx, testutil.MakeWorkerCluster(name).KubeConfigSecret(hubCfg.Namespace, s.Name).Obj())).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(wcCondition(g, ctx, name, strata.WorkerClusterConnected).Status).To(Equal(metav1.ConditionTrue))
	}).Should(Succeed())
}

// wcCondition returns a WorkerCluster's condition of type t, once it has one.
func wcCondition(g Gomega, ctx context.Context, name, t string) metav1.Condition {
	var wc strata.WorkerCluster
	g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: name}, &wc)).To(Succeed())
	c := meta.FindStatusCondition(wc.Status.Conditions, t)
	g.Expect(c).NotTo(BeNil(), "no %s condition yet", t)
	return *c
}

// env is one spec's corner of the fleet: a namespace on the hub and every
// worker, a flavor of its own (nodes labelled pool=<name>) behind a
// ClusterQueue and LocalQueue "lq" on each, so specs do not share capacity.
type env struct {
	name   string
	ns     string
	flavor string
}

// newEnv sets up a spec's corner; racks[w] lists, per rack of worker w,
// the CPUs of its nodes (none: the worker has no nodes of the flavor).
func newEnv(ctx context.Context, name string, racks map[string][][]string) *env {
	GinkgoHelper()
	e := &env{name: name, ns: "ns-" + name, flavor: "f-" + name}
	Expect(hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}})).To(Succeed())
	Expect(hub.Client.Create(ctx, testutil.MakeClusterQueue("cq-"+name).Flavor(e.flavor).Obj())).To(Succeed())
	Expect(hub.Client.Create(ctx, testutil.MakeLocalQueue("lq", e.ns, "cq-"+name))).To(Succeed())
	for _, w := range workers {
		c := w.Client
		Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}})).To(Succeed())
		Expect(client.IgnoreAlreadyExists(c.Create(ctx, testutil.MakeTopology(topology, rack, host).Obj()))).To(Succeed())
		Expect(c.Create(ctx, testutil.MakeResourceFlavor(e.flavor).NodeLabel("pool", name).TopologyName(topology).Obj())).To(Succeed())
		Expect(c.Create(ctx, testutil.MakeClusterQueue("cq-"+name).Flavor(e.flavor).Obj())).To(Succeed())
		Expect(c.Create(ctx, testutil.MakeLocalQueue("lq", e.ns, "cq-"+name))).To(Succeed())
		for r, nodes := range racks[w.Name] {
			for i, cpu := range nodes {
				e.createNode(ctx, w, fmt.Sprintf("%s-%s-r%d-n%d", name, w.Name, r, i), fmt.Sprintf("r%d", r), cpu)
			}
		}
	}
	waitSummaries(ctx, e.flavor, racks)
	// Registered now, it runs after the cleanups the spec registers
	// later (a worker made reachable again, a hub restarted).
	DeferCleanup(e.cleanUp)
	return e
}

// cleanUp deletes the env's jobs on the hub and waits a while for the hub
// to take their copies off the workers, then deletes what the spec made on
// the workers itself (local jobs, forged copies). The workers are shared: a
// later spec that fences, drains or times out a worker would otherwise act
// on every copy left there too (its agent evicts them all and the hub
// places them again), and its own Jobs would wait behind that. Best
// effort: what is still there after the waits stays, and the spec does
// not fail for it.
func (e *env) cleanUp(specCtx SpecContext) {
	ctx, cancel := context.WithTimeout(specCtx, 3*cleanUpWait)
	defer cancel()
	deleteOwners(ctx, hub, e.ns)
	e.waitGone(ctx, []*framework.Cluster{hub})
	for _, w := range workers {
		deleteOwners(ctx, w, e.ns)
	}
	e.waitGone(ctx, workers)
}

// deleteOwners deletes, on c, the jobs whose Workloads are in namespace ns,
// and the Workloads that have no job.
func deleteOwners(ctx context.Context, c *framework.Cluster, ns string) {
	var wls strata.WorkloadList
	if err := c.Client.List(ctx, &wls, client.InNamespace(ns)); err != nil {
		GinkgoLogr.Info("Cleaning up: listing Workloads", "cluster", c.Name, "namespace", ns, "error", err.Error())
		return
	}
	for i := range wls.Items {
		var obj client.Object = &wls.Items[i]
		if owner := metav1.GetControllerOf(obj); owner != nil {
			u := &unstructured.Unstructured{}
			u.SetAPIVersion(owner.APIVersion)
			u.SetKind(owner.Kind)
			u.SetNamespace(ns)
			u.SetName(owner.Name)
			obj = u
		}
		if err := c.Client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			GinkgoLogr.Info("Cleaning up: deleting", "cluster", c.Name, "namespace", ns, "name", obj.GetName(), "error", err.Error())
		}
	}
}

// waitGone waits, at most cleanUpWait, until the clusters have no
// Workload in the env's namespace; it only logs what is left.
func (e *env) waitGone(ctx context.Context, clusters []*framework.Cluster) {
	var left []string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, cleanUpWait, true, func(ctx context.Context) (bool, error) {
		left = nil
		for _, c := range clusters {
			var l strata.WorkloadList
			if err := c.Client.List(ctx, &l, client.InNamespace(e.ns)); err != nil {
				left = append(left, fmt.Sprintf("%s: %v", c.Name, err))
				continue
			}
			for _, wl := range l.Items {
				left = append(left, c.Name+"/"+wl.Name)
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		GinkgoLogr.Info("Cleaning up: not everything went", "namespace", e.ns, "left", left, "error", err.Error())
	}
}

// cleanUpWait bounds env.cleanUp's wait.
const cleanUpWait = 20 * time.Second

// waitSummaries waits until every worker with nodes of a flavor (racks,
// as newEnv takes it) publishes a summary of them all and the hub has read
// that summary or a later one: a spec that expects the tightest fit must
// not race the summaries of a flavor made a moment ago.
func waitSummaries(ctx context.Context, flavor string, racks map[string][][]string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		for w, rs := range racks {
			want := 0
			for _, nodes := range rs {
				want += len(nodes)
			}
			if want == 0 {
				continue
			}
			var list strata.CapacitySummaryList
			g.Expect(worker(w).Client.List(ctx, &list)).To(Succeed())
			var gen int64 = -1
			for _, s := range list.Items {
				if s.Spec.Flavor == flavor && int(s.Status.Nodes) == want {
					gen = s.Status.SummaryGeneration
				}
			}
			g.Expect(gen).NotTo(BeEquivalentTo(-1), "%s has not summarized its %d nodes of %s yet", w, want, flavor)
			var wc strata.WorkerCluster
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: w}, &wc)).To(Succeed())
			read := int64(-1)
			for _, s := range wc.Status.Summaries {
				if s.Flavor == flavor {
					read = s.SummaryGeneration
				}
			}
			g.Expect(read).To(BeNumerically(">=", gen), "the hub has not read %s's summary of %s yet", w, flavor)
		}
	}).Should(Succeed())
}

// createNode creates a Ready, untainted node of the env's pool.
func (e *env) createNode(ctx context.Context, w *framework.Cluster, name, rackName, cpu string) {
	GinkgoHelper()
	Expect(framework.CreateReadyNode(ctx, w.Client, name, map[string]string{"pool": e.name, rack: rackName, host: name}, cpu)).To(Succeed())
}

// job returns a Job of the env's queue: its pods, of cpu CPUs each, with
// the given pod template annotations.
func (e *env) job(name string, pods int32, cpu string, annotations map[string]string) *batchv1.Job {
	return testutil.MakeJob(name, e.ns).Queue("lq").Parallelism(pods).Completions(pods).Request("cpu", cpu).
		PodAnnotations(annotations).Obj()
}

// hubWorkload returns the hub Workload of a Job.
func hubWorkload(g Gomega, ctx context.Context, job *batchv1.Job) *strata.Workload {
	var wl strata.Workload
	g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: workload.JobWorkloadName(job.Name)}, &wl)).To(Succeed())
	return &wl
}

// worker returns the worker cluster of a name.
func worker(name string) *framework.Cluster {
	GinkgoHelper()
	c := clusters.Get(name)
	Expect(c).NotTo(BeNil())
	return c
}

// copyOn returns the copy of a hub Job on a worker and its Workload (nil
// when it has none).
func copyOn(g Gomega, ctx context.Context, w *framework.Cluster, job *batchv1.Job) (*batchv1.Job, *strata.Workload) {
	var j batchv1.Job
	if err := w.Client.Get(ctx, client.ObjectKeyFromObject(job), &j); err != nil {
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		return nil, nil
	}
	var wl strata.Workload
	if err := w.Client.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: workload.JobWorkloadName(job.Name)}, &wl); err != nil {
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		return &j, nil
	}
	return &j, &wl
}

// copies returns the workers that have a copy of a hub Job.
func copies(g Gomega, ctx context.Context, job *batchv1.Job) []string {
	var out []string
	for _, w := range workers {
		if j, _ := copyOn(g, ctx, w, job); j != nil {
			out = append(out, w.Name)
		}
	}
	return out
}

// racksOf returns the racks an admission assigns pods to, with their
// counts (hosts are named <env>-<worker>-<rack>-n<i>).
func racksOf(g Gomega, admission *strata.Admission) map[string]int32 {
	g.Expect(admission).NotTo(BeNil())
	a, err := tas.Decode(admission.PodSetAssignments[0].TopologyAssignment)
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]int32{}
	for _, d := range a.Domains {
		parts := strings.Split(d.Values[len(d.Values)-1], "-")
		g.Expect(len(parts)).To(BeNumerically(">=", 2))
		out[parts[len(parts)-2]] += d.Count
	}
	return out
}

// completeCopy does what the worker's Job controller would when the copy's
// pods succeed: its status says Complete.
func completeCopy(ctx context.Context, w *framework.Cluster, job *batchv1.Job) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		cp, _ := copyOn(g, ctx, w, job)
		g.Expect(cp).NotTo(BeNil())
		g.Expect(ptr.Deref(cp.Spec.Suspend, true)).To(BeFalse(), "the agent starts the copy once admitted")
		now := metav1.Now()
		start := metav1.NewTime(now.Add(-time.Second))
		cp.Status = batchv1.JobStatus{StartTime: &start, CompletionTime: &now, Succeeded: ptr.Deref(cp.Spec.Completions, 1), Ready: ptr.To[int32](0),
			Conditions: []batchv1.JobCondition{
				{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
				{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
			}}
		g.Expect(w.Client.Status().Update(ctx, cp)).To(Succeed())
	}).Should(Succeed())
}

// hubReads waits until a worker publishes a summary of flavor that
// satisfies check, and then until the hub has read that generation or a
// later one: a spec's next decision is made on it.
func hubReads(ctx SpecContext, name, flavor string, check func(g Gomega, st *strata.CapacitySummaryStatus)) {
	GinkgoHelper()
	var generation int64
	Eventually(func(g Gomega) {
		var cs strata.CapacitySummary
		g.Expect(worker(name).Client.Get(ctx, client.ObjectKey{Name: flavor}, &cs)).To(Succeed())
		check(g, &cs.Status)
		generation = cs.Status.SummaryGeneration
	}).Should(Succeed())
	Eventually(func(g Gomega) {
		var wc strata.WorkerCluster
		g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: name}, &wc)).To(Succeed())
		read := int64(0)
		for _, s := range wc.Status.Summaries {
			if s.Flavor == flavor {
				read = s.SummaryGeneration
			}
		}
		g.Expect(read).To(BeNumerically(">=", generation))
	}).Should(Succeed())
}

// denyWith puts a ValidatingAdmissionPolicy named name, and its binding,
// in force on cluster c: requests of ops on resources of group that fail
// expression are refused with message. It returns remove, which takes
// both away (once; also at the spec's cleanup, with the cleanup's own
// context: the spec's is cancelled when it fails, and a policy left in
// place would break c for every spec after it).
func denyWith(ctx context.Context, c *framework.Cluster, name string, ops []admissionregistrationv1.OperationType, group, version, resource, expression, message string) (remove func(context.Context)) {
	GinkgoHelper()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: ops,
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{version}, Resources: []string{resource}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: expression, Message: message}},
		},
	}
	Expect(c.Client.Create(ctx, policy)).To(Succeed())
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	Expect(c.Client.Create(ctx, binding)).To(Succeed())
	removed := false
	remove = func(ctx context.Context) {
		if !removed {
			removed = true
			Expect(client.IgnoreNotFound(c.Client.Delete(ctx, binding))).To(Succeed())
			Expect(client.IgnoreNotFound(c.Client.Delete(ctx, policy))).To(Succeed())
		}
	}
	DeferCleanup(func(ctx SpecContext) { remove(ctx) })
	return remove
}

// priorityClasses creates WorkloadPriorityClasses on the hub and every
// worker.
func priorityClasses(ctx context.Context, classes map[string]int32) {
	GinkgoHelper()
	for _, c := range append([]*framework.Cluster{hub}, workers...) {
		for name, value := range classes {
			Expect(c.Client.Create(ctx, testutil.MakeWorkloadPriorityClass(name, value))).To(Succeed())
		}
	}
}

// preemptWithin lets the env's ClusterQueue on worker w preempt lower
// priorities within itself.
func (e *env) preemptWithin(ctx context.Context, w *framework.Cluster) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		var cq strata.ClusterQueue
		g.Expect(w.Client.Get(ctx, client.ObjectKey{Name: "cq-" + e.name}, &cq)).To(Succeed())
		cq.Spec.Preemption = &strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}
		g.Expect(w.Client.Update(ctx, &cq)).To(Succeed())
	}).Should(Succeed())
}

// hubQuota sets the CPU quota of the env's hub ClusterQueue.
func hubQuota(ctx SpecContext, e *env, cpus string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		var cq strata.ClusterQueue
		g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: "cq-" + e.name}, &cq)).To(Succeed())
		cq.Spec.Flavors[0].Resources = []strata.ResourceQuota{{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse(cpus)}}
		g.Expect(hub.Client.Update(ctx, &cq)).To(Succeed())
	}).Should(Succeed())
}
