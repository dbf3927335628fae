package hub

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsapi "sigs.k8s.io/lws/api/leaderworkerset/v1"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/controller/jobs"
)

var _ = Describe("LeaderWorkerSets on the hub", func() {
	It("says, with a Warning event on a queue-labelled set, that the hub does not dispatch it", func(ctx SpecContext) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "lws-"}}
		Expect(hub.Client.Create(ctx, ns)).To(Succeed())
		l := &lwsapi.LeaderWorkerSet{
			ObjectMeta: metav1.ObjectMeta{Name: "inference", Namespace: ns.Name, Labels: map[string]string{strata.QueueNameLabel: "q"}},
			Spec: lwsapi.LeaderWorkerSetSpec{Replicas: ptr.To[int32](2), StartupPolicy: lwsapi.LeaderCreatedStartupPolicy,
				RolloutStrategy: lwsapi.RolloutStrategy{Type: lwsapi.RollingUpdateStrategyType},
				LeaderWorkerTemplate: lwsapi.LeaderWorkerTemplate{Size: ptr.To[int32](2),
					WorkerTemplate: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}}},
		}
		Expect(hub.Client.Create(ctx, l)).To(Succeed())
		Eventually(func(g Gomega) {
			var evs eventsv1.EventList
			g.Expect(hub.Client.List(ctx, &evs, client.InNamespace(ns.Name))).To(Succeed())
			g.Expect(evs.Items).To(ContainElement(And(HaveField("Regarding.Kind", "LeaderWorkerSet"), HaveField("Regarding.Name", "inference"),
				HaveField("Type", corev1.EventTypeWarning), HaveField("Reason", jobs.ReasonNotDispatched),
				HaveField("Note", ContainSubstring("create it on a worker cluster")))))
		}).Should(Succeed())
		var wls strata.WorkloadList
		Expect(hub.Client.List(ctx, &wls, client.InNamespace(ns.Name))).To(Succeed())
		Expect(wls.Items).To(BeEmpty(), "no hub Workload: nothing waits to be dispatched")
	})
})
