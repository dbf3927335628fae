package kwokcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsapi "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"strata.dev/strata/test/integration/framework"
)

// The LeaderWorkerSet controller next to a kwok cluster, as JobSet's: the
// binary built from the module proxy by hack/k8s-binaries.sh (bin/k8s/lws,
// the module's cmd) runs as a process with an admin kubeconfig, its
// webhooks served on 127.0.0.1 with a certificate made here and registered
// with a URL. Its webhooks are needed: the set's defaulting fills what the
// controller expects, and the pod webhook gives each pod its group and
// worker index.

// PrepareLWSController writes into dir a serving certificate for
// 127.0.0.1 and the controller's configuration (webhooks on port, no
// metrics or health server, no leader election), registers its webhooks
// on the cluster of c to be served there, and returns the configuration
// file, for the controller's --config.
func PrepareLWSController(ctx context.Context, c client.Client, dir string, port int) (string, error) {
	ca, err := writeServingCert(dir)
	if err != nil {
		return "", err
	}
	config := filepath.Join(dir, "lws-config.yaml")
	body := fmt.Sprintf(`apiVersion: config.lws.x-k8s.io/v1alpha1
kind: Configuration
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
metrics:
  bindAddress: "0"
health:
  healthProbeBindAddress: "0"
`, port, dir)
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		return "", err
	}
	module, err := framework.LeaderWorkerSetModuleDir()
	if err != nil {
		return "", err
	}
	create := []admissionv1.OperationType{admissionv1.Create}
	if err := registerWebhooks(ctx, c, filepath.Join(module, "config", "webhook", "manifests.yaml"), "lws",
		fmt.Sprintf("https://127.0.0.1:%d", port), ca, lwsapi.SetNameLabelKey,
		map[string][]admissionv1.OperationType{"mpod.kb.io": create, "vpod.kb.io": {admissionv1.Create, admissionv1.Update}}); err != nil {
		return "", err
	}
	return config, nil
}
