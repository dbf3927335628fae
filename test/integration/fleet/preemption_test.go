package fleet

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/dispatch"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/pkg/workload"
	"strata.dev/strata/test/integration/framework"
)

var _ = Describe("Fleet preemption", func() {
	It("preempts on exactly the one worker whose rack frees room, and only the workloads needed there", func(ctx SpecContext) {
		racks := [][]string{{"4", "4"}, {"4", "4"}}
		e := newEnv(ctx, "fpre", map[string][][]string{"w1": racks, "w2": racks, "w3": racks})
		const low, high, urgent = "fpre-low", "fpre-high", "fpre-urgent"
		priorityClasses(ctx, map[string]int32{low: 10, high: 1000, urgent: 500})
		By("letting the workers' ClusterQueue preempt lower priorities within itself")
		for _, w := range workers {
			e.preemptWithin(ctx, w)
		}

		By("filling every node of every worker with a one-pod Job submitted there: w1 and w2 have one low-priority pod per rack, w3 a whole rack of them")
		classes := map[string][][]string{
			"w1": {{low, high}, {low, high}},
			"w2": {{high, low}, {low, high}},
			"w3": {{high, high}, {low, low}},
		}
		local := map[string][]*batchv1.Job{}
		for w, rs := range classes {
			for r, nodes := range rs {
				for n, class := range nodes {
					node := fmt.Sprintf("%s-%s-r%d-n%d", e.name, w, r, n)
					job := e.job("local-"+node, 1, "4", nil)
					job.Labels[strata.PriorityClassLabel] = class
					job.Spec.Template.Spec.NodeSelector = map[string]string{host: node}
					Expect(worker(w).Client.Create(ctx, job)).To(Succeed())
					local[w] = append(local[w], job)
				}
			}
		}
		for w, jobs := range local {
			for _, job := range jobs {
				Eventually(func(g Gomega) {
					_, wl := copyOn(g, ctx, worker(w), job)
					g.Expect(wl).NotTo(BeNil())
					g.Expect(wl.Status.Admission).NotTo(BeNil(), "%s on %s: %v", job.Name, w, wl.Status.Conditions)
				}).Should(Succeed())
			}
		}
		hubReads(ctx, "w3", e.flavor, func(g Gomega, st *strata.CapacitySummaryStatus) {
			g.Expect(st.Preemptible).NotTo(BeEmpty(), "w3's summary tells what preempting would free")
			g.Expect(st.Preemptible[0].ClusterQueue).To(Equal("cq-" + e.name))
			g.Expect(st.Preemptible[0].Priority).To(BeEquivalentTo(10))
		})

		By("submitting a rack-required Job of priority 500 that needs a whole rack, on the hub")
		job := e.job("urgent", 2, "4", map[string]string{strata.PodSetRequiredTopologyAnnotation: rack})
		job.Labels[strata.PriorityClassLabel] = urgent
		Expect(hub.Client.Create(ctx, job)).To(Succeed())

		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Placement).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w3"), "%v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.PreemptUpTo).To(Equal(ptr.To[int32](10)))
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "%v", wl.Status.Conditions)
			g.Expect(copies(g, ctx, job)).To(Equal([]string{"w3"}))
			_, cp := copyOn(g, ctx, worker("w3"), job)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(racksOf(g, cp.Status.Admission)).To(Equal(map[string]int32{"r1": 2}))
		}).Should(Succeed())

		By("w3's two low-priority workloads of rack r1 were preempted, and nothing else anywhere")
		Eventually(func(g Gomega) {
			for w, jobs := range local {
				for _, lj := range jobs {
					_, wl := copyOn(g, ctx, worker(w), lj)
					g.Expect(wl).NotTo(BeNil())
					preempted := meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadPreempted)
					want := w == "w3" && lj.Labels[strata.PriorityClassLabel] == low
					g.Expect(preempted).To(Equal(want), "%s on %s", lj.Name, w)
					if want {
						c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadPreempted)
						g.Expect(c.Message).To(ContainSubstring(workload.JobWorkloadName(job.Name)))
					} else {
						g.Expect(wl.Status.Admission).NotTo(BeNil(), "%s on %s keeps its admission", lj.Name, w)
					}
				}
			}
		}).Should(Succeed())

		By("the hub Workload's attempt names what w3 preempted for it")
		Eventually(func(g Gomega) {
			reason := dispatch.ChoiceReason(hubWorkload(g, ctx, job))
			g.Expect(reason).To(ContainSubstring("the worker preempted for it on w3"))
			for _, lj := range local["w3"] {
				if lj.Labels[strata.PriorityClassLabel] == low { // w3's low-priority Jobs are rack r1's
					g.Expect(reason).To(ContainSubstring(e.ns + "/" + workload.JobWorkloadName(lj.Name)))
				}
			}
		}).Should(Succeed())
	})

	It("preempts on the one worker whose ClusterQueue's quota, not its capacity, keeps a high-priority Job out", func(ctx SpecContext) {
		racks := [][]string{{"8", "8"}}
		e := newEnv(ctx, "fquota", map[string][][]string{"w1": racks, "w2": racks})
		const low, urgent = "fquota-low", "fquota-urgent"
		priorityClasses(ctx, map[string]int32{low: 10, urgent: 500})
		By("giving each worker's ClusterQueue 4 of its 16 CPUs, preempting lower priorities within itself")
		for _, w := range []string{"w1", "w2"} {
			Eventually(func(g Gomega) {
				var cq strata.ClusterQueue
				g.Expect(worker(w).Client.Get(ctx, client.ObjectKey{Name: "cq-" + e.name}, &cq)).To(Succeed())
				cq.Spec.Flavors[0].Resources = []strata.ResourceQuota{{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("4")}}
				cq.Spec.Preemption = &strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}
				g.Expect(worker(w).Client.Update(ctx, &cq)).To(Succeed())
			}).Should(Succeed())
		}
		By("filling both quotas with low-priority Jobs submitted on the workers: two of 2 CPUs on w1, four of 1 CPU on w2")
		local := map[string][]*batchv1.Job{}
		for w, shape := range map[string]struct {
			n   int
			cpu string
		}{"w1": {2, "2"}, "w2": {4, "1"}} {
			for i := range shape.n {
				job := e.job(fmt.Sprintf("local-%s-%d", w, i), 1, shape.cpu, nil)
				job.Labels[strata.PriorityClassLabel] = low
				Expect(worker(w).Client.Create(ctx, job)).To(Succeed())
				local[w] = append(local[w], job)
			}
		}
		for w, jobs := range local {
			for _, job := range jobs {
				Eventually(func(g Gomega) {
					_, wl := copyOn(g, ctx, worker(w), job)
					g.Expect(wl).NotTo(BeNil())
					g.Expect(wl.Status.Admission).NotTo(BeNil(), "%s on %s: %v", job.Name, w, wl.Status.Conditions)
				}).Should(Succeed())
			}
		}
		hubReads(ctx, "w1", e.flavor, func(g Gomega, st *strata.CapacitySummaryStatus) {
			g.Expect(st.Preemptible).To(HaveLen(1))
			g.Expect(st.Preemptible[0].Requests.Cpu().String()).To(Equal("4"), "the quota the band holds")
		})

		By("submitting a Job of priority 500 asking 2 CPUs on the hub: it fits every worker's nodes and no worker's quota")
		job := e.job("urgent", 1, "2", nil)
		job.Labels[strata.PriorityClassLabel] = urgent
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Placement).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w1"), "two workloads in w1's band against four in w2's: %v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.PreemptUpTo).To(Equal(ptr.To[int32](10)))
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "%v", wl.Status.Conditions)
			g.Expect(copies(g, ctx, job)).To(Equal([]string{"w1"}))
		}).Should(Succeed())

		By("one of w1's workloads was preempted, and nothing on w2")
		Eventually(func(g Gomega) {
			preempted := 0
			for w, jobs := range local {
				for _, lj := range jobs {
					_, wl := copyOn(g, ctx, worker(w), lj)
					g.Expect(wl).NotTo(BeNil())
					if meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadPreempted) {
						g.Expect(w).To(Equal("w1"), "%s was preempted", lj.Name)
						preempted++
					}
				}
			}
			g.Expect(preempted).To(Equal(1))
		}).Should(Succeed())
	})

	It("reclaims on a worker what a cohort peer borrows there, for a hub Job of a queue that only reclaims", func(ctx SpecContext) {
		e := newEnv(ctx, "freclaim", map[string][][]string{"w1": {{"8", "8"}}})
		w1 := worker("w1")
		cohort, borrower := "teams-"+e.name, "borrower-"+e.name
		By("giving w1's ClusterQueue 4 CPUs in a cohort, reclaiming within it and preempting nothing within itself")
		e.joinCohort(ctx, w1, cohort, "4", &strata.ClusterQueuePreemption{ReclaimWithinCohort: strata.PreemptionAny})
		By("letting a queue of no quota of its own borrow all 4 with Jobs submitted on w1")
		local := e.borrow(ctx, w1, cohort, borrower, 4)
		admittedOn(ctx, w1, local)
		hubReads(ctx, "w1", e.flavor, func(g Gomega, st *strata.CapacitySummaryStatus) {
			g.Expect(st.Preemptible).To(HaveLen(1), "the borrower's workloads are what reclaiming frees")
			g.Expect(st.Preemptible[0].ClusterQueue).To(Equal(borrower))
			g.Expect(st.Preemptible[0].Requests.Cpu().String()).To(Equal("4"))
		})

		By("submitting a Job of 2 CPUs on the hub: w1's nodes have room, its queue's quota is lent")
		job := e.job("reclaimer", 1, "2", nil)
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Placement).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w1"), "%v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.PreemptUpTo).To(Equal(ptr.To[int32](0)))
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "%v", wl.Status.Conditions)
		}).Should(Succeed())

		By("two of the borrower's workloads were reclaimed, the other two run on")
		Eventually(func(g Gomega) {
			preempted := 0
			for _, lj := range local {
				_, wl := copyOn(g, ctx, w1, lj)
				g.Expect(wl).NotTo(BeNil())
				if c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadPreempted); c != nil && c.Status == metav1.ConditionTrue {
					g.Expect(c.Reason).To(Equal(strata.PreemptedInCohortReclamation))
					preempted++
				}
			}
			g.Expect(preempted).To(Equal(2))
		}).Should(Succeed())
	})

	It("preempts its queue's own lower priority and reclaims a cohort peer's borrowing together on a worker, for a hub Job neither frees enough for", func(ctx SpecContext) {
		e := newEnv(ctx, "fcombo", map[string][][]string{"w1": {{"8", "8"}}})
		w1 := worker("w1")
		const low, urgent = "fcombo-low", "fcombo-urgent"
		for _, c := range []*framework.Cluster{hub, w1} {
			for name, value := range map[string]int32{low: 10, urgent: 500} {
				Expect(c.Client.Create(ctx, testutil.MakeWorkloadPriorityClass(name, value))).To(Succeed())
			}
		}
		cohort, borrower := "teams-"+e.name, "borrower-"+e.name
		By("giving w1's ClusterQueue 4 CPUs in a cohort, preempting lower priorities within itself and reclaiming within the cohort")
		e.joinCohort(ctx, w1, cohort, "4", &strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority, ReclaimWithinCohort: strata.PreemptionAny})
		By("running a low-priority Job of 2 CPUs in it, and letting a queue of no quota of its own borrow the other 2")
		own := e.job("own-low", 1, "2", nil)
		own.Labels[strata.PriorityClassLabel] = low
		Expect(w1.Client.Create(ctx, own)).To(Succeed())
		admittedOn(ctx, w1, []*batchv1.Job{own})
		local := append([]*batchv1.Job{own}, e.borrow(ctx, w1, cohort, borrower, 2)...)
		admittedOn(ctx, w1, local)
		hubReads(ctx, "w1", e.flavor, func(g Gomega, st *strata.CapacitySummaryStatus) {
			g.Expect(st.Preemptible).To(HaveLen(2), "its own low-priority workload, and the borrower's")
		})

		By("submitting a high-priority Job of 4 CPUs on the hub: its own 2 and the 2 lent are both needed")
		job := e.job("urgent", 1, "4", nil)
		job.Labels[strata.PriorityClassLabel] = urgent
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Placement).NotTo(BeNil(), "%v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w1"), "%v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.PreemptUpTo).To(Equal(ptr.To[int32](10)))
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "%v", wl.Status.Conditions)
		}).Should(Succeed())

		By("its queue's own workload and both of the borrower's were preempted")
		Eventually(func(g Gomega) {
			reasons := map[string]string{}
			for _, lj := range local {
				_, wl := copyOn(g, ctx, w1, lj)
				g.Expect(wl).NotTo(BeNil())
				if c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadPreempted); c != nil && c.Status == metav1.ConditionTrue {
					reasons[lj.Name] = c.Reason
				}
			}
			g.Expect(reasons).To(Equal(map[string]string{"own-low": strata.PreemptedInClusterQueue,
				"borrowed-0": strata.PreemptedInCohortReclamation, "borrowed-1": strata.PreemptedInCohortReclamation}))
		}).Should(Succeed())
	})

	It("preempts only the workloads holding what a hub Job is short of, though CPU-only work of a lower priority shares the node", func(ctx SpecContext) {
		e := newEnv(ctx, "fhold", map[string][][]string{"w1": {{"16"}}})
		w1 := worker("w1")
		const gpus = corev1.ResourceName("nvidia.com/gpu")
		const low, mid, urgent = "fhold-low", "fhold-mid", "fhold-urgent"
		for _, c := range []*framework.Cluster{hub, w1} {
			for name, value := range map[string]int32{low: 10, mid: 20, urgent: 500} {
				Expect(c.Client.Create(ctx, testutil.MakeWorkloadPriorityClass(name, value))).To(Succeed())
			}
		}
		By("giving w1's node 4 GPUs, and its ClusterQueue a quota of 4 GPUs (and CPUs enough), preempting lower priorities within itself")
		Eventually(func(g Gomega) {
			var n corev1.Node
			g.Expect(w1.Client.Get(ctx, client.ObjectKey{Name: e.name + "-w1-r0-n0"}, &n)).To(Succeed())
			n.Status.Allocatable[gpus] = resource.MustParse("4")
			n.Status.Capacity[gpus] = resource.MustParse("4")
			g.Expect(w1.Client.Status().Update(ctx, &n)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			var cq strata.ClusterQueue
			g.Expect(w1.Client.Get(ctx, client.ObjectKey{Name: "cq-" + e.name}, &cq)).To(Succeed())
			cq.Spec.Flavors[0].Resources = []strata.ResourceQuota{{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("100")}, {Name: gpus, NominalQuota: resource.MustParse("4")}}
			cq.Spec.Preemption = &strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}
			g.Expect(w1.Client.Update(ctx, &cq)).To(Succeed())
		}).Should(Succeed())

		By("running, submitted on w1, a CPU-only Job of 8 CPUs at priority 10 and a Job of 1 CPU and 4 GPUs at priority 20")
		cpuOnly := e.job("cpu-only", 1, "8", nil)
		cpuOnly.Labels[strata.PriorityClassLabel] = low
		gpuOne := gpuJob("gpu", e.ns, gpus)
		gpuOne.Labels[strata.PriorityClassLabel] = mid
		local := []*batchv1.Job{cpuOnly, gpuOne}
		for _, j := range local {
			Expect(w1.Client.Create(ctx, j)).To(Succeed())
		}
		admittedOn(ctx, w1, local)
		hubReads(ctx, "w1", e.flavor, func(g Gomega, st *strata.CapacitySummaryStatus) {
			var holding []string
			for _, p := range st.Preemptible {
				if p.Holding != "" {
					holding = append(holding, fmt.Sprintf("%s ≤ %d: %d", p.Holding, p.Priority, p.Workloads))
				}
			}
			g.Expect(holding).To(Equal([]string{"nvidia.com/gpu ≤ 20: 1"}), "the series of the GPU holders: %+v", st.Preemptible)
		})

		By("submitting a Job of 1 CPU and 4 GPUs at priority 500 on the hub: short of GPU quota, and of GPUs on the node")
		job := gpuJob("urgent", e.ns, gpus)
		job.Labels[strata.PriorityClassLabel] = urgent
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Placement).NotTo(BeNil(), "%v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w1"), "%v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.PreemptUpTo).To(Equal(ptr.To[int32](20)))
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "%v", wl.Status.Conditions)
		}).Should(Succeed())

		By("the GPU Job was preempted, the CPU-only one of a lower priority runs on")
		Eventually(func(g Gomega) {
			preempted := map[string]bool{}
			for _, lj := range local {
				_, wl := copyOn(g, ctx, w1, lj)
				g.Expect(wl).NotTo(BeNil())
				preempted[lj.Name] = meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadPreempted)
			}
			g.Expect(preempted).To(Equal(map[string]bool{"cpu-only": false, "gpu": true}))
		}).Should(Succeed())
	})

	It("chooses the worker where the Job's class outranks the victims there, when the workers give the class other values than the hub", func(ctx SpecContext) {
		e := newEnv(ctx, "fprio", map[string][][]string{"w1": {{"4"}}, "w2": {{"4"}}})
		const low, urgent = "fprio-low", "fprio-urgent"
		values := map[*framework.Cluster]int32{hub: 500, worker("w1"): 5, worker("w2"): 500}
		for c, v := range values {
			Expect(c.Client.Create(ctx, testutil.MakeWorkloadPriorityClass(low, 10))).To(Succeed())
			Expect(c.Client.Create(ctx, testutil.MakeWorkloadPriorityClass(urgent, v))).To(Succeed())
		}
		By("letting both workers' ClusterQueue preempt lower priorities within itself, and filling each with a Job of priority 10")
		var local []*batchv1.Job
		for _, w := range []string{"w1", "w2"} {
			Eventually(func(g Gomega) {
				var cq strata.ClusterQueue
				g.Expect(worker(w).Client.Get(ctx, client.ObjectKey{Name: "cq-" + e.name}, &cq)).To(Succeed())
				cq.Spec.Preemption = &strata.ClusterQueuePreemption{WithinClusterQueue: strata.PreemptionLowerPriority}
				g.Expect(worker(w).Client.Update(ctx, &cq)).To(Succeed())
			}).Should(Succeed())
			job := e.job("local-"+w, 1, "4", nil)
			job.Labels[strata.PriorityClassLabel] = low
			Expect(worker(w).Client.Create(ctx, job)).To(Succeed())
			admittedOn(ctx, worker(w), []*batchv1.Job{job})
			local = append(local, job)
		}
		hubReads(ctx, "w1", e.flavor, func(g Gomega, st *strata.CapacitySummaryStatus) {
			g.Expect(st.Preemptible).NotTo(BeEmpty())
			g.Expect(st.PriorityClasses).To(ContainElement(strata.SummaryPriorityClass{Source: strata.WorkloadPriorityClassSource, Name: urgent, Value: 5}))
		})
		hubReads(ctx, "w2", e.flavor, func(g Gomega, st *strata.CapacitySummaryStatus) {
			g.Expect(st.PriorityClasses).To(ContainElement(strata.SummaryPriorityClass{Source: strata.WorkloadPriorityClassSource, Name: urgent, Value: 500}))
		})

		By("submitting a Job of class urgent on the hub: 500 there and on w2, 5 on w1, below w1's victims")
		job := e.job("urgent", 1, "4", nil)
		job.Labels[strata.PriorityClassLabel] = urgent
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Placement).NotTo(BeNil(), "%v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.Attempts).NotTo(BeEmpty())
			g.Expect(wl.Status.Placement.Attempts[0].Cluster).To(Equal("w2"), "the first choice: %v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.PreemptUpTo).To(Equal(ptr.To[int32](10)))
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "%v", wl.Status.Conditions)
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			preempted := map[string]bool{}
			for i, w := range []string{"w1", "w2"} {
				_, wl := copyOn(g, ctx, worker(w), local[i])
				g.Expect(wl).NotTo(BeNil())
				preempted[w] = meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadPreempted)
			}
			g.Expect(preempted).To(Equal(map[string]bool{"w1": false, "w2": true}))
		}).Should(Succeed())
	})

	It("sends no copy to a worker that lists its priority classes and lacks the Job's, though it fits best there", func(ctx SpecContext) {
		// w1 has the tighter fit (3 CPUs against 8), but not the class.
		e := newEnv(ctx, "fnoclass", map[string][][]string{"w1": {{"3"}}, "w2": {{"8"}}})
		const class = "fnoclass-batch"
		for _, c := range []*framework.Cluster{hub, worker("w2")} {
			Expect(c.Client.Create(ctx, testutil.MakeWorkloadPriorityClass(class, 50))).To(Succeed())
		}
		By("letting w1's ClusterQueue preempt, so that its summaries list its classes")
		e.preemptWithin(ctx, worker("w1"))
		hubReads(ctx, "w1", e.flavor, func(g Gomega, st *strata.CapacitySummaryStatus) {
			g.Expect(st.PriorityClasses).NotTo(BeNil())
			g.Expect(st.PriorityClasses).NotTo(ContainElement(HaveField("Name", class)))
		})

		job := e.job("batch", 1, "3", nil)
		job.Labels[strata.PriorityClassLabel] = class
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "%v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.Attempts).To(HaveLen(1), "admitted the first time")
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w2"))
		}).Should(Succeed())
	})

	It("does not storm: 20 high-priority Jobs on a full fleet preempt one workload each, each on the one worker where it then runs", func(ctx SpecContext) {
		racks := [][]string{{"4", "4"}, {"4", "4"}}
		e := newEnv(ctx, "fstorm", map[string][][]string{"w1": racks, "w2": racks, "w3": racks})
		const low, urgent = "fstorm-low", "fstorm-urgent"
		priorityClasses(ctx, map[string]int32{low: 10, urgent: 500})
		for _, w := range workers {
			e.preemptWithin(ctx, w)
		}
		By("filling each of the 12 nodes with a low-priority one-pod Job submitted on its worker")
		local := map[string][]*batchv1.Job{}
		for _, w := range workers {
			for r := range 2 {
				for n := range 2 {
					node := fmt.Sprintf("%s-%s-r%d-n%d", e.name, w.Name, r, n)
					job := e.job("local-"+node, 1, "4", nil)
					job.Labels[strata.PriorityClassLabel] = low
					job.Spec.Template.Spec.NodeSelector = map[string]string{host: node}
					Expect(w.Client.Create(ctx, job)).To(Succeed())
					local[w.Name] = append(local[w.Name], job)
				}
			}
		}
		for w, jobs := range local {
			for _, job := range jobs {
				Eventually(func(g Gomega) {
					_, wl := copyOn(g, ctx, worker(w), job)
					g.Expect(wl).NotTo(BeNil())
					g.Expect(wl.Status.Admission).NotTo(BeNil(), "%s on %s: %v", job.Name, w, wl.Status.Conditions)
				}).Should(Succeed())
			}
		}
		By("submitting 20 one-pod Jobs of priority 500 on the hub at once")
		var urgentJobs []*batchv1.Job
		for i := range 20 {
			job := e.job(fmt.Sprintf("urgent-%02d", i), 1, "4", nil)
			job.Labels[strata.PriorityClassLabel] = urgent
			Expect(hub.Client.Create(ctx, job)).To(Succeed())
			urgentJobs = append(urgentJobs, job)
		}
		By("12 of them run, each in the place of exactly one low-priority workload preempted on the worker where it runs")
		Eventually(func(g Gomega) {
			running := map[string]string{} // preemptor workload -> worker
			for _, job := range urgentJobs {
				wl := hubWorkload(g, ctx, job)
				if wl.Status.Admission != nil {
					running[job.Namespace+"/"+workload.JobWorkloadName(job.Name)] = wl.Status.Placement.Cluster
				}
			}
			g.Expect(running).To(HaveLen(12))
			victims := map[string][]string{} // preemptor -> workers where it preempted
			for w, jobs := range local {
				for _, lj := range jobs {
					_, wl := copyOn(g, ctx, worker(w), lj)
					g.Expect(wl).NotTo(BeNil())
					c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadPreempted)
					g.Expect(c).NotTo(BeNil(), "%s on %s was not preempted", lj.Name, w)
					found := false
					for preemptor := range running {
						if strings.Contains(c.Message, preemptor+" ") {
							victims[preemptor] = append(victims[preemptor], w)
							found = true
						}
					}
					g.Expect(found).To(BeTrue(), "%s on %s was preempted for a workload that does not run: %s", lj.Name, w, c.Message)
				}
			}
			for preemptor, where := range victims {
				g.Expect(where).To(Equal([]string{running[preemptor]}), "%s preempted on %v and runs on %s", preemptor, where, running[preemptor])
			}
			g.Expect(victims).To(HaveLen(12))
		}).WithTimeout(3 * time.Minute).Should(Succeed())
		By("the other 8 wait on the hub, with no copy anywhere")
		Eventually(func(g Gomega) {
			for _, job := range urgentJobs {
				wl := hubWorkload(g, ctx, job)
				if wl.Status.Admission == nil {
					g.Expect(wl.Status.Placement == nil || wl.Status.Placement.Cluster == "").To(BeTrue(), "%s: %v", job.Name, wl.Status.Placement)
				}
			}
		}).Should(Succeed())
	})

	It("preempts nothing when the chosen worker's victims finish before its agent acts: the marked copy is admitted on the room they left", func(ctx SpecContext) {
		e := newEnv(ctx, "fgone", map[string][][]string{"w1": {{"4", "4"}}})
		const low, urgent = "fgone-low", "fgone-urgent"
		priorityClasses(ctx, map[string]int32{low: 10, urgent: 500})
		w1 := worker("w1")
		e.preemptWithin(ctx, w1)
		By("filling w1's rack with two low-priority Jobs submitted there")
		var local []*batchv1.Job
		for n := range 2 {
			node := fmt.Sprintf("%s-w1-r0-n%d", e.name, n)
			job := e.job("local-"+node, 1, "4", nil)
			job.Labels[strata.PriorityClassLabel] = low
			job.Spec.Template.Spec.NodeSelector = map[string]string{host: node}
			Expect(w1.Client.Create(ctx, job)).To(Succeed())
			local = append(local, job)
		}
		for _, job := range local {
			Eventually(func(g Gomega) {
				_, wl := copyOn(g, ctx, w1, job)
				g.Expect(wl).NotTo(BeNil())
				g.Expect(wl.Status.Admission).NotTo(BeNil(), "%v", wl.Status.Conditions)
			}).Should(Succeed())
		}
		hubReads(ctx, "w1", e.flavor, func(g Gomega, st *strata.CapacitySummaryStatus) {
			g.Expect(st.Preemptible).NotTo(BeEmpty())
		})

		By("w1's agent stopped; a rack-required Job of priority 500 needing the whole rack, on the hub: the hub marks w1's copy to preempt up to 10")
		stopAgents["w1"]()
		restarted := false
		DeferCleanup(func() {
			if !restarted {
				stopAgents["w1"] = startAgent(w1)
			}
		})
		job := e.job("urgent", 2, "4", map[string]string{strata.PodSetRequiredTopologyAnnotation: rack})
		job.Labels[strata.PriorityClassLabel] = urgent
		Expect(hub.Client.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Placement).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w1"), "%v", wl.Status.Conditions)
			g.Expect(wl.Status.Placement.PreemptUpTo).To(Equal(ptr.To[int32](10)))
			cp, _ := copyOn(g, ctx, w1, job)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(cp.Annotations).To(HaveKeyWithValue(strata.PreemptUpToAnnotation, "10"))
		}).Should(Succeed())

		By("both low-priority Jobs finish before w1's agent is back")
		for _, lj := range local {
			completeCopy(ctx, w1, lj)
			Eventually(func(g Gomega) {
				_, wl := copyOn(g, ctx, w1, lj)
				g.Expect(wl).NotTo(BeNil())
				meta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: strata.WorkloadFinished, Status: metav1.ConditionTrue,
					Reason: "Succeeded", Message: "the Job succeeded"})
				g.Expect(w1.Client.Status().Update(ctx, wl)).To(Succeed())
			}).Should(Succeed())
		}
		stopAgents["w1"] = startAgent(w1)
		restarted = true

		By("the copy is admitted in the rack; neither finished Job was preempted")
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, job)
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "%v", wl.Status.Conditions)
			_, cp := copyOn(g, ctx, w1, job)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(racksOf(g, cp.Status.Admission)).To(Equal(map[string]int32{"r0": 2}))
		}).Should(Succeed())
		Consistently(func(g Gomega) {
			for _, lj := range local {
				_, wl := copyOn(g, ctx, w1, lj)
				g.Expect(wl).NotTo(BeNil())
				g.Expect(meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadPreempted)).To(BeNil(), "%s was preempted", lj.Name)
				g.Expect(meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadEvicted)).To(BeNil(), "%s was evicted", lj.Name)
			}
		}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
	})
})

// joinCohort puts the env's ClusterQueue on w in cohort, with nominal
// CPUs and the preemption policy.
func (e *env) joinCohort(ctx SpecContext, w *framework.Cluster, cohort, nominal string, preemption *strata.ClusterQueuePreemption) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		var cq strata.ClusterQueue
		g.Expect(w.Client.Get(ctx, client.ObjectKey{Name: "cq-" + e.name}, &cq)).To(Succeed())
		cq.Spec.Cohort = cohort
		cq.Spec.Flavors[0].Resources = []strata.ResourceQuota{{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse(nominal)}}
		cq.Spec.Preemption = preemption
		g.Expect(w.Client.Update(ctx, &cq)).To(Succeed())
	}).Should(Succeed())
}

// borrow creates, on w, a ClusterQueue borrower of no quota of its own in
// cohort and n Jobs of 1 CPU submitted to it (LocalQueue lq-b): what they
// hold, they borrow.
func (e *env) borrow(ctx SpecContext, w *framework.Cluster, cohort, borrower string, n int) []*batchv1.Job {
	GinkgoHelper()
	Expect(w.Client.Create(ctx, testutil.MakeClusterQueue(borrower).Cohort(cohort).Flavor(e.flavor, "cpu", "0").Obj())).To(Succeed())
	Expect(w.Client.Create(ctx, testutil.MakeLocalQueue("lq-b", e.ns, borrower))).To(Succeed())
	var jobs []*batchv1.Job
	for i := range n {
		job := testutil.MakeJob(fmt.Sprintf("borrowed-%d", i), e.ns).Queue("lq-b").Parallelism(1).Completions(1).Request("cpu", "1").Obj()
		Expect(w.Client.Create(ctx, job)).To(Succeed())
		jobs = append(jobs, job)
	}
	return jobs
}

// gpuJob is a Job of queue lq of one pod of 1 CPU and 4 GPUs (their
// limit too: an extended resource's).
func gpuJob(name, ns string, gpus corev1.ResourceName) *batchv1.Job {
	job := testutil.MakeJob(name, ns).Queue("lq").Parallelism(1).Completions(1).Request("cpu", "1").Request(gpus, "4").Obj()
	c := &job.Spec.Template.Spec.Containers[0]
	c.Resources.Limits = corev1.ResourceList{gpus: resource.MustParse("4")}
	return job
}

// admittedOn waits until every one of jobs, submitted on w, is admitted
// there.
func admittedOn(ctx SpecContext, w *framework.Cluster, jobs []*batchv1.Job) {
	GinkgoHelper()
	for _, job := range jobs {
		Eventually(func(g Gomega) {
			_, wl := copyOn(g, ctx, w, job)
			g.Expect(wl).NotTo(BeNil())
			g.Expect(wl.Status.Admission).NotTo(BeNil(), "%s: %v", job.Name, wl.Status.Conditions)
		}).Should(Succeed())
	}
}
