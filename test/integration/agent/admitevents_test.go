package agent

import (
	"regexp"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/agent/controller/jobs"
	"strata.dev/strata/pkg/admitevents"
	"strata.dev/strata/pkg/testutil"
)

var _ = Describe("Admission events", Ordered, Label("agent", "admission"), func() {
	var ns string

	BeforeAll(func(ctx SpecContext) {
		Expect(worker.Client.Create(ctx, testutil.MakeTopology("digest-topology", block, rack, host).Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeResourceFlavor("tas-digest").NodeLabel("pool", "digest").TopologyName("digest-topology").Obj())).To(Succeed())
		Expect(worker.Client.Create(ctx, testutil.MakeClusterQueue("digest-q").Flavor("tas-digest").Obj())).To(Succeed())
		createPoolNode(ctx, "digest", "dg1", "b1", "dr1", "4")
		ns = createNamespace(ctx, nil)
		createLocalQueue(ctx, ns, "digest-q")
	})

	It("records no event per started Job, and digests on the ClusterQueue naming them (events.admissions PerClusterQueue, the default)", func(ctx SpecContext) {
		a, b := newJob(ns, "digest-q", 1, nil), newJob(ns, "digest-q", 1, nil)
		Expect(worker.Client.Create(ctx, a)).To(Succeed())
		Expect(worker.Client.Create(ctx, b)).To(Succeed())
		for _, j := range []*batchv1.Job{a, b} {
			Eventually(func(g Gomega) {
				var got batchv1.Job
				g.Expect(worker.Client.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(Succeed())
				g.Expect(ptr.Deref(got.Spec.Suspend, true)).To(BeFalse(), "started")
			}, timeout).Should(Succeed())
		}
		By("digests once the interval passes, counting and naming both")
		// An admission joins the digest just after its Job's start is
		// written, so a tick that falls in between puts the two admissions
		// in two digests; pkg/admitevents' tests check the grouping itself.
		digest := regexp.MustCompile(`^(\d+) workloads? admitted in the last 30s: (.*)$`)
		Eventually(func(g Gomega) {
			eventsClock.Step(admitevents.DefaultInterval)
			var evs eventsv1.EventList
			g.Expect(worker.Client.List(ctx, &evs, client.InNamespace("default"))).To(Succeed())
			count, names := 0, ""
			for _, e := range evs.Items {
				if e.Regarding.Kind == "ClusterQueue" && e.Regarding.Name == "digest-q" && e.Reason == admitevents.DigestReason {
					m := digest.FindStringSubmatch(e.Note)
					g.Expect(m).NotTo(BeNil(), "digest %q", e.Note)
					n, err := strconv.Atoi(m[1])
					g.Expect(err).NotTo(HaveOccurred())
					count += n
					names += m[2] + ", "
				}
			}
			g.Expect(count).To(Equal(2))
			g.Expect(names).To(SatisfyAll(
				ContainSubstring(ns+"/"+jobs.WorkloadName(a.Name)),
				ContainSubstring(ns+"/"+jobs.WorkloadName(b.Name))))
		}, timeout, 250*time.Millisecond).Should(Succeed())
		By("no Started event on either Job")
		var evs eventsv1.EventList
		Expect(worker.Client.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
		for _, e := range evs.Items {
			Expect(e.Reason).NotTo(Equal(jobs.ReasonStarted), "event %s on %s/%s", e.Name, e.Regarding.Kind, e.Regarding.Name)
		}
	})
})
