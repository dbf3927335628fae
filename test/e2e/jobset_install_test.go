package e2e

import (
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/test/integration/framework"
	"strata.dev/strata/test/kwokcluster"
)

// JobSet on the suite's clusters: its CRD (from the module cache, at the
// version go.mod requires) everywhere JobSets are submitted, and on
// workers its controller, built from the module proxy by
// hack/k8s-binaries.sh (bin/k8s/jobset). On kwok the controller runs as a
// process with the admin kubeconfig, its webhooks served on 127.0.0.1
// with a certificate the suite makes and registered with a URL (JobSet's
// manifests register them through a Service, which has no endpoint off a
// real node); JobSet's internal certificate management, which writes the
// webhook configurations for the Service, is off.

// installJobSetCRD applies JobSet's CRD on a cluster and waits until it is
// served.
func installJobSetCRD(c cluster) {
	GinkgoHelper()
	paths, err := framework.JobSetCRDPaths()
	Expect(err).NotTo(HaveOccurred())
	installCRDs(c, "JobSet's CRD", paths, &jobsetapi.JobSetList{})
}

// installCRDs applies CRDs (what names them) on a cluster and waits until
// list, a list of their kind, can be read.
func installCRDs(c cluster, what string, paths []string, list client.ObjectList) {
	GinkgoHelper()
	By("installing " + what + " on " + c.Name())
	for _, p := range paths {
		kubectl(c, "apply", "--server-side", "-f", p)
	}
	k := adminClient(c)
	Eventually(func() error {
		return k.List(context.Background(), list)
	}, wait, 200*time.Millisecond).Should(Succeed())
}

// kubectl runs the built kubectl against cluster c.
func kubectl(c cluster, args ...string) {
	GinkgoHelper()
	bin, err := framework.BinDir()
	Expect(err).NotTo(HaveOccurred())
	out, err := exec.Command(filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", c.Kubeconfig()}, args...)...).CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "kubectl %v: %s", args, out)
}

// runJobSetController starts JobSet's controller for a kwok cluster
// (kwokcluster.PrepareJobSetController): its webhooks on a free port of
// 127.0.0.1, registered by URL.
func runJobSetController(c cluster) {
	GinkgoHelper()
	By("running JobSet's controller for " + c.Name())
	bin, err := framework.BinDir()
	Expect(err).NotTo(HaveOccurred())
	_, portText, err := net.SplitHostPort(freeAddress())
	Expect(err).NotTo(HaveOccurred())
	port, err := strconv.Atoi(portText)
	Expect(err).NotTo(HaveOccurred())
	k := adminClient(c)
	config, err := kwokcluster.PrepareJobSetController(context.Background(), k, filepath.Join(tmp, c.Name()+"-jobset"), port)
	Expect(err).NotTo(HaveOccurred())
	start("jobset-"+c.Name(), filepath.Join(bin, "jobset"), "--kubeconfig", c.Kubeconfig(), "--config", config)

	By("waiting until JobSet's webhooks answer on " + c.Name())
	Eventually(func(g Gomega) {
		js := &jobsetapi.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "default"},
			Spec: jobsetapi.JobSetSpec{ReplicatedJobs: []jobsetapi.ReplicatedJob{{Name: "probe", Replicas: 1,
				Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "fake"}}}}}}}}}}
		g.Expect(k.Create(context.Background(), js, client.DryRunAll)).To(Succeed())
		g.Expect(js.Spec.SuccessPolicy).NotTo(BeNil(), "JobSet's defaulting webhook fills in the success policy")
	}, wait, time.Second).Should(Succeed())
}

// jobSetVersion is the version of sigs.k8s.io/jobset go.mod requires.
func jobSetVersion() string {
	GinkgoHelper()
	dir, err := framework.JobSetModuleDir()
	Expect(err).NotTo(HaveOccurred())
	_, version, found := strings.Cut(filepath.Base(dir), "@")
	Expect(found).To(BeTrue(), "module directory %s", dir)
	return version
}

// twoLevelJobSet is KEP-2724's two-level JobSet: 2 Jobs of 4 pods of 2
// CPUs, the JobSet in one block, each Job's pods on one host (the slice
// size defaults to the Jobs' parallelism).
func twoLevelJobSet(name, namespace, queue string) *jobsetapi.JobSet {
	workers := testutil.MakeJob("workers", "").Parallelism(4).Completions(4).Indexed().Image("fake").Request("cpu", "2").
		PodAnnotations(map[string]string{
			"kueue.x-k8s.io/podset-required-topology":       block,
			"kueue.x-k8s.io/podset-slice-required-topology": host,
		}).Obj()
	return testutil.MakeJobSet(name, namespace).Queue(queue).ReplicatedJob(2, workers).Obj()
}

// jobSetCompleted says whether a JobSet completed.
func jobSetCompleted(js *jobsetapi.JobSet) bool {
	return apimeta.IsStatusConditionTrue(js.Status.Conditions, string(jobsetapi.JobSetCompleted))
}

// expectJobsOnOneHostEach checks that the pods of a JobSet ran, every
// Job's on one host (a different one per Job), all in one block.
func expectJobsOnOneHostEach(ctx context.Context, k client.Client, js *jobsetapi.JobSet) {
	GinkgoHelper()
	var pods corev1.PodList
	Expect(k.List(ctx, &pods, client.InNamespace(js.Namespace), client.MatchingLabels{jobsetapi.JobSetNameKey: js.Name})).To(Succeed())
	Expect(pods.Items).To(HaveLen(8))
	hosts := map[string]map[string]bool{}
	blocks := map[string]bool{}
	for _, p := range pods.Items {
		Expect(p.Spec.NodeName).NotTo(BeEmpty(), "pod %s ran nowhere", p.Name)
		idx := p.Labels[jobsetapi.JobIndexKey]
		if hosts[idx] == nil {
			hosts[idx] = map[string]bool{}
		}
		hosts[idx][p.Spec.NodeName] = true
		var n corev1.Node
		Expect(k.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, &n)).To(Succeed())
		blocks[n.Labels[block]] = true
	}
	Expect(blocks).To(HaveLen(1), "the JobSet's pods ran in blocks %v", blocks)
	used := map[string]bool{}
	for idx, hs := range hosts {
		Expect(hs).To(HaveLen(1), "Job %s's pods ran on hosts %v", idx, hs)
		for h := range hs {
			used[h] = true
		}
	}
	Expect(hosts).To(HaveLen(2), "two Jobs")
	Expect(used).To(HaveLen(2), "each Job on its own host: %v", hosts)
}
