package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs/mpijob"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/test/integration/framework"
	"strata.dev/strata/test/kwokcluster"
)

// MPIJobs on the suite's clusters: the MPIJob CRD (from the module cache,
// at the version go.mod requires) where MPIJobs are submitted, and on a
// worker the MPI operator's controller, built from the module proxy by
// hack/k8s-binaries.sh (bin/k8s/mpi-operator: the operator's controller
// package behind a small main without its health server on :8080 and its
// leader election), run as a process with the admin kubeconfig.

// installMPIJobCRD applies the MPIJob CRD on a cluster and waits until it
// is served.
func installMPIJobCRD(c cluster) {
	GinkgoHelper()
	paths, err := framework.MPIJobCRDPaths()
	Expect(err).NotTo(HaveOccurred())
	installCRDs(c, "the MPIJob CRD", paths, &kubeflow.MPIJobList{})
}

// runMPIOperator runs the MPI operator's controller for a kwok cluster.
func runMPIOperator(c cluster) {
	GinkgoHelper()
	By("running the MPI operator for " + c.Name())
	bin, err := framework.BinDir()
	Expect(err).NotTo(HaveOccurred())
	startPlain("mpi-operator-"+c.Name(), filepath.Join(bin, "mpi-operator"), "--kubeconfig", c.Kubeconfig())
}

// piMPIJob is KEP-2724's MPIJob with runLauncherAsWorker: a launcher (rank
// 0) and 2 workers of 1 CPU, launcher and workers in one rack (one
// podset-group-name). kwok completes the launcher's pod (its Job's) after
// runFor; the workers run until the operator ends them.
func piMPIJob(name, namespace, queue, runFor string) *kubeflow.MPIJob {
	ann := map[string]string{strata.PodSetRequiredTopologyAnnotation: rack, strata.PodSetGroupNameAnnotation: name}
	return testutil.MakeMPIJob(name, namespace).Queue(queue).SlotsPerWorker(1).RunLauncherAsWorker(true).Workers(2).Request("cpu", "1").
		LauncherAnnotations(ann).LauncherAnnotations(map[string]string{kwokcluster.RunForAnnotation: runFor}).WorkerAnnotations(ann).Obj()
}

// mpiJobOnWorker describes an MPIJob's copy on a worker, its launcher Job
// and its pods, for a failure message: where an MPIJob that does not
// finish stopped.
func mpiJobOnWorker(ctx context.Context, c client.Client, j *kubeflow.MPIJob) string {
	var b strings.Builder
	var cp kubeflow.MPIJob
	if err := c.Get(ctx, client.ObjectKeyFromObject(j), &cp); err != nil {
		return fmt.Sprintf("the copy: %v", err)
	}
	fmt.Fprintf(&b, "copy: suspend=%v conditions=%+v replicas=%+v", ptr.Deref(cp.Spec.RunPolicy.Suspend, false), cp.Status.Conditions, cp.Status.ReplicaStatuses)
	var launcher batchv1.Job
	if err := c.Get(ctx, client.ObjectKey{Namespace: j.Namespace, Name: j.Name + mpijob.LauncherSuffix}, &launcher); err != nil {
		fmt.Fprintf(&b, "; launcher Job: %v", err)
	} else {
		fmt.Fprintf(&b, "; launcher Job: suspend=%v labels=%v gates=%v status=%+v", ptr.Deref(launcher.Spec.Suspend, false),
			launcher.Spec.Template.Labels, launcher.Spec.Template.Spec.SchedulingGates, launcher.Status)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(j.Namespace)); err != nil {
		fmt.Fprintf(&b, "; pods: %v", err)
	}
	for _, p := range pods.Items {
		if !strings.HasPrefix(p.Name, j.Name+"-") {
			continue
		}
		fmt.Fprintf(&b, "; pod %s: phase=%s node=%q gates=%v podset=%q", p.Name, p.Status.Phase, p.Spec.NodeName, p.Spec.SchedulingGates, p.Labels[strata.PodSetLabel])
	}
	return b.String()
}
