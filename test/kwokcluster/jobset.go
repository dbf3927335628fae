package kwokcluster

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	"strata.dev/strata/test/integration/framework"
)

// JobSet's controller next to a kwok cluster: the binary built from the
// module proxy by hack/k8s-binaries.sh (bin/k8s/jobset) runs as a process
// with an admin kubeconfig, its webhooks served on 127.0.0.1 with a
// certificate made here and registered with a URL. JobSet's manifests
// register them through a Service, which has no endpoint without real
// nodes, and its internal certificate management (which writes the
// webhook configurations for that Service) is off. Its defaulting webhook
// is needed: the controller expects defaulted JobSets.

// PrepareJobSetController writes into dir a serving certificate for
// 127.0.0.1 and the controller's configuration (webhooks on port, metrics
// with the same certificate, no leader election), registers JobSet's
// webhooks on the cluster of c to be served there, and returns the
// configuration file, for the controller's --config.
func PrepareJobSetController(ctx context.Context, c client.Client, dir string, port int) (string, error) {
	ca, err := writeServingCert(dir)
	if err != nil {
		return "", err
	}
	config := filepath.Join(dir, "jobset-config.yaml")
	body := fmt.Sprintf(`apiVersion: config.jobset.x-k8s.io/v1alpha1
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
  certDir: %s
`, port, dir, dir)
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		return "", err
	}
	if err := registerJobSetWebhooks(ctx, c, fmt.Sprintf("https://127.0.0.1:%d", port), ca); err != nil {
		return "", err
	}
	return config, nil
}

// registerJobSetWebhooks creates JobSet's webhook configurations as its
// manifests define them, with the effect of their kustomize patches (the
// pod webhooks only for JobSets' pods, on creation), served at url.
func registerJobSetWebhooks(ctx context.Context, c client.Client, url string, ca []byte) error {
	dir, err := framework.JobSetModuleDir()
	if err != nil {
		return err
	}
	create := []admissionv1.OperationType{admissionv1.Create}
	return registerWebhooks(ctx, c, filepath.Join(dir, "config", "components", "webhook", "manifests.yaml"), "jobset", url, ca,
		jobsetapi.JobSetNameKey, map[string][]admissionv1.OperationType{"mpod.kb.io": create, "vpod.kb.io": create})
}

// registerWebhooks creates the webhook configurations of a controller's
// manifests (a kubebuilder webhook/manifests.yaml), named after the
// controller, served at url (the manifests' paths) with the CA ca; the
// pod webhooks named in podOps see only the pods carrying podLabel, on
// those operations, as the controllers' kustomize patches make them.
func registerWebhooks(ctx context.Context, c client.Client, manifests, controller, url string, ca []byte, podLabel string, podOps map[string][]admissionv1.OperationType) error {
	raw, err := os.ReadFile(manifests)
	if err != nil {
		return err
	}
	pods := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: podLabel, Operator: metav1.LabelSelectorOpExists}}}
	byURL := func(cc *admissionv1.WebhookClientConfig) {
		path := ""
		if cc.Service != nil {
			path = ptr.Deref(cc.Service.Path, "")
		}
		*cc = admissionv1.WebhookClientConfig{URL: ptr.To(url + path), CABundle: ca}
	}
	for _, doc := range bytes.Split(raw, []byte("\n---")) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return err
		}
		var obj client.Object
		switch tm.Kind {
		case "MutatingWebhookConfiguration":
			var m admissionv1.MutatingWebhookConfiguration
			if err := yaml.Unmarshal(doc, &m); err != nil {
				return err
			}
			m.Name = controller + "-mutating-webhook-configuration"
			for i := range m.Webhooks {
				w := &m.Webhooks[i]
				byURL(&w.ClientConfig)
				if ops, ok := podOps[w.Name]; ok {
					w.ObjectSelector, w.Rules[0].Operations = pods, ops
				}
			}
			obj = &m
		case "ValidatingWebhookConfiguration":
			var v admissionv1.ValidatingWebhookConfiguration
			if err := yaml.Unmarshal(doc, &v); err != nil {
				return err
			}
			v.Name = controller + "-validating-webhook-configuration"
			for i := range v.Webhooks {
				w := &v.Webhooks[i]
				byURL(&w.ClientConfig)
				if ops, ok := podOps[w.Name]; ok {
					w.ObjectSelector, w.Rules[0].Operations = pods, ops
				}
			}
			obj = &v
		default:
			continue
		}
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("registering %s's webhooks: %w", controller, err)
		}
	}
	return nil
}

// writeServingCert writes a serving certificate for 127.0.0.1, signed by a
// new CA, as tls.crt and tls.key into dir, and returns the CA's
// certificate.
func writeServingCert(dir string) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTemplate := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "strata-e2e-webhook-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), nil
}
