package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/dispatch"
)

// journalled returns the dispatches the hub's journal holds of Workload
// uid, by generation.
func journalled(g Gomega, ctx context.Context, uid string) []int64 {
	var pages corev1.ConfigMapList
	g.Expect(hub.Client.List(ctx, &pages, client.InNamespace(hubCfg.Namespace), client.MatchingLabels{dispatch.JournalLabel: hubCfg.Origin})).To(Succeed())
	var gens []int64
	for _, cm := range pages.Items {
		var entries []dispatch.JournalEntry
		g.Expect(json.Unmarshal([]byte(cm.Data["dispatches"]), &entries)).To(Succeed())
		for _, e := range entries {
			if string(e.UID) == uid {
				gens = append(gens, e.Generation)
			}
		}
	}
	return gens
}

var _ = Describe("The dispatch journal", Serial, Label("journal", "faults"), func() {
	It("keeps a dispatch its Workload's status does not have across a hub restart: no second copy, and the record lands once it may be written", func(ctx SpecContext) {
		e := newEnv(ctx, "journal", map[string][][]string{"w1": {{"4"}}})
		By("a policy on the hub that refuses any status of the spec's Workloads with a placement")
		remove := denyWith(ctx, hub, "no-placement", []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
			strata.GroupVersion.Group, "*", "workloads/status",
			fmt.Sprintf("object.metadata.namespace != '%s' || !has(object.status.placement) || !has(object.status.placement.cluster)", e.ns),
			"no placement may be written")
		probe := e.job("probe", 1, "1", nil)
		probe.Labels[strata.QueueNameLabel] = "no-such-queue" // never dispatched
		Expect(hub.Client.Create(ctx, probe)).To(Succeed())
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, probe)
			wl.Status.Placement = &strata.Placement{Cluster: "w1", Flavor: "f", DispatchGeneration: 1}
			err := hub.Client.Status().Update(ctx, wl, client.DryRunAll)
			g.Expect(apierrors.IsInvalid(err) || apierrors.IsForbidden(err)).To(BeTrue(), "the policy is not in force yet: %v", err)
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

		By("a Job placed on w1: its copy runs there, its dispatch is in the journal only")
		j := e.job("journalled", 1, "1", nil)
		Expect(hub.Client.Create(ctx, j)).To(Succeed())
		var uid string
		var copyUID string
		Eventually(func(g Gomega) {
			wl := hubWorkload(g, ctx, j)
			uid = string(wl.UID)
			g.Expect(wl.Status.Placement == nil || wl.Status.Placement.Cluster == "").To(BeTrue(), "the policy is not in force")
			cp, cwl := copyOn(g, ctx, worker("w1"), j)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(cwl).NotTo(BeNil())
			g.Expect(cwl.Status.Admission).NotTo(BeNil())
			g.Expect(cp.Labels).To(HaveKeyWithValue(strata.DispatchGenerationLabel, "1"))
			copyUID = string(cp.UID)
			g.Expect(journalled(g, ctx, uid)).To(Equal([]int64{1}))
		}, 60*time.Second, 100*time.Millisecond).Should(Succeed())

		By("the hub restarts: it reads the journal and sends no second copy")
		stopHub()
		stopHub = startHub()
		same := func(g Gomega) {
			cp, _ := copyOn(g, ctx, worker("w1"), j)
			g.Expect(cp).NotTo(BeNil())
			g.Expect(string(cp.UID)).To(Equal(copyUID), "the copy was replaced")
			g.Expect(journalled(g, ctx, uid)).To(Equal([]int64{1}), "dispatched again")
			wl := hubWorkload(g, ctx, j)
			g.Expect(wl.Status.Placement == nil || wl.Status.Placement.Cluster == "").To(BeTrue())
		}
		Consistently(same, 6*time.Second, 200*time.Millisecond).Should(Succeed())

		By("the policy goes: the record and the admission land, and the journal page goes")
		remove(ctx)
		// A change of the hub Job brings the Workload back at once (its
		// failed writes wait out the controller's backoff otherwise).
		Eventually(func(g Gomega) {
			var hj = j.DeepCopy()
			g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(j), hj)).To(Succeed())
			if hj.Annotations == nil {
				hj.Annotations = map[string]string{}
			}
			hj.Annotations["poke"] = time.Now().String()
			g.Expect(hub.Client.Update(ctx, hj)).To(Succeed())
			wl := hubWorkload(g, ctx, j)
			g.Expect(wl.Status.Placement).NotTo(BeNil())
			g.Expect(wl.Status.Placement.Cluster).To(Equal("w1"))
			g.Expect(wl.Status.Placement.DispatchGeneration).To(Equal(int64(1)))
			g.Expect(wl.Status.Admission).NotTo(BeNil())
			var results []strata.PlacementResult
			for _, a := range wl.Status.Placement.Attempts {
				results = append(results, a.Result)
			}
			g.Expect(results).To(Equal([]strata.PlacementResult{strata.PlacementAdmitted}))
		}, 60*time.Second, time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(journalled(g, ctx, uid)).To(BeEmpty())
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
		var cp = j.DeepCopy()
		err := worker("w1").Client.Get(ctx, client.ObjectKeyFromObject(j), cp)
		Expect(err == nil && string(cp.UID) == copyUID || apierrors.IsNotFound(err)).To(BeTrue())
	})
})
