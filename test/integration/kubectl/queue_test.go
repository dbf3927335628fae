package kubectl

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
)

var _ = Describe("kubectl strata queue", Label("kubectl"), func() {
	It("lists a worker's pending workloads in admission order, and explain gives a Job's position", func(ctx SpecContext) {
		create(ctx, worker, testutil.MakeClusterQueue("ordered").Flavor("gpu").Obj(), nil)
		create(ctx, worker, testutil.MakeLocalQueue("ordered", namespace, "ordered"), nil)
		for _, w := range []struct {
			name     string
			priority int32
		}{{"low", 1}, {"high", 100}, {"mid", 10}} {
			j := create(ctx, worker, job("q-"+w.name, "ordered"), nil)
			wl := jobWorkload(j)
			wl.Spec.Priority = ptr.To(w.priority)
			wl.Spec.QueueName = "ordered"
			create(ctx, worker, wl, func(wl *strata.Workload) {
				condition(&wl.Status.Conditions, strata.WorkloadAdmitted, metav1.ConditionFalse, "Pending", "waiting for capacity")
			})
		}
		out, err := run(ctx, "queue", "cq/ordered", "--kubeconfig", worker.KubeconfigPath)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(HavePrefix("ClusterQueue ordered (on the worker): 3 pending\n"))
		Expect(out).To(MatchRegexp(`(?m)^1\s+1\s+ml\s+job-q-high\s+ordered\s+100\s`))
		Expect(out).To(MatchRegexp(`(?m)^2\s+2\s+ml\s+job-q-mid\s+ordered\s+10\s`))
		Expect(out).To(MatchRegexp(`(?m)^3\s+3\s+ml\s+job-q-low\s+ordered\s+1\s`))

		out, err = run(ctx, "queue", "ordered", "-n", namespace, "--kubeconfig", worker.KubeconfigPath, "-o", "json")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring(`"localQueue": "ml/ordered"`))

		out, err = run(ctx, "explain", "q-mid", "-n", namespace, "--kubeconfig", worker.KubeconfigPath)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("Position:   2 of 3 in ClusterQueue ordered\n"))

		_, err = run(ctx, "queue", "nowhere", "-n", namespace, "--kubeconfig", worker.KubeconfigPath)
		Expect(err).To(MatchError(ContainSubstring("LocalQueue ml/nowhere not found on")))
	})
})
