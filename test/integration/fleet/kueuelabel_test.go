package fleet

import (
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/testutil"
)

// warnings collects the warnings an API server returns.
type warnings struct {
	mu   sync.Mutex
	text []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.text = append(w.text, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.text
	w.text = nil
	return out
}

var _ = Describe("A job on the hub labelled for Kueue alone", Label("fleet", "migrate"), func() {
	It("is created with a warning that names Strata's label; one labelled for Strata gets none", func(ctx SpecContext) {
		seen := &warnings{}
		cfg := rest.CopyConfig(hub.Config)
		cfg.WarningHandler = seen
		c, err := client.New(cfg, client.Options{Scheme: hub.Client.Scheme()})
		Expect(err).NotTo(HaveOccurred())

		kueueOnly := testutil.MakeJob("kueue-only", "default").Obj()
		kueueOnly.Labels = map[string]string{"kueue.x-k8s.io/queue-name": "team-a"}
		Eventually(func(g Gomega) {
			seen.take()
			g.Expect(c.Create(ctx, kueueOnly.DeepCopy(), client.DryRunAll)).To(Succeed())
			g.Expect(seen.take()).To(ContainElement(ContainSubstring(
				"this Job carries kueue.x-k8s.io/queue-name but not strata.dev/queue-name, so Strata does not dispatch it (it runs on this hub cluster, if at all): label it strata.dev/queue-name: team-a to submit it to Strata")))
		}).Should(Succeed())

		both := testutil.MakeJob("both", "default").Queue("team-a").Obj()
		both.Labels["kueue.x-k8s.io/queue-name"] = "team-a"
		Expect(both.Labels).To(HaveKey(strata.QueueNameLabel))
		seen.take()
		Expect(c.Create(ctx, both, client.DryRunAll)).To(Succeed())
		Expect(seen.take()).To(BeEmpty())
	})
})
