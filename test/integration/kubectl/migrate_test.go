package kubectl

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/pkg/kubectlstrata"
	"strata.dev/strata/test/integration/framework"
)

// runSplit runs kubectl-strata and returns its standard output and error
// apart.
func runSplit(ctx context.Context, args ...string) (string, string, error) {
	cmd := kubectlstrata.NewCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// decodeAll decodes a YAML stream into objects.
func decodeAll(data string) []*unstructured.Unstructured {
	GinkgoHelper()
	var out []*unstructured.Unstructured
	d := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(data), 4096)
	for {
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			break
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
	return out
}

func kueueExample(name string) string {
	return filepath.Join(framework.RepoRoot(), "docs", "examples", "kueue", name)
}

// applyAll creates the objects on c (the namespaces they need too) and
// expects the API server to accept every one.
func applyAll(ctx context.Context, c *framework.Cluster, objs []*unstructured.Unstructured) {
	GinkgoHelper()
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" {
			err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			if !apierrors.IsAlreadyExists(err) {
				Expect(err).NotTo(HaveOccurred())
			}
		}
		Expect(c.Client.Create(ctx, o)).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(c.Client.Delete(ctx, o))).To(Succeed()) })
	}
}

// kueueCRD is a schemaless CRD of a Kueue kind, enough for the API
// server to store Kueue's objects as they are.
func kueueCRD(kind, plural string, namespaced bool) *apiextensionsv1.CustomResourceDefinition {
	scope := apiextensionsv1.ClusterScoped
	if namespaced {
		scope = apiextensionsv1.NamespaceScoped
	}
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + ".kueue.x-k8s.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "kueue.x-k8s.io", Scope: scope,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: strings.ToLower(kind)},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1beta1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}}}},
		},
	}
}

var _ = Describe("kubectl strata migrate", Ordered, Label("kubectl", "migrate"), func() {
	It("turns a Kueue worker's objects into Strata objects that a worker's API server accepts as they are", func(ctx SpecContext) {
		out, notes, err := runSplit(ctx, "migrate", "-f", kueueExample("worker.yaml"))
		Expect(err).NotTo(HaveOccurred(), notes)
		Expect(notes).To(Equal("# 6 Strata objects written; 0 things not carried over; 0 to do\n"))
		objs := decodeAll(out)
		var kinds []string
		for _, o := range objs {
			Expect(o.GetAPIVersion()).To(Equal("strata.dev/v1beta1"))
			kinds = append(kinds, o.GetKind())
		}
		Expect(kinds).To(Equal([]string{"Topology", "ResourceFlavor", "WorkloadPriorityClass", "ClusterQueue", "ClusterQueue", "LocalQueue"}))
		applyAll(ctx, worker, objs)
	})

	It("turns a MultiKueue manager's clusters into WorkerClusters a hub accepts, saying what to do", func(ctx SpecContext) {
		out, notes, err := runSplit(ctx, "migrate", "-f", kueueExample("manager.yaml"), "--hub-namespace", "strata-system")
		Expect(err).NotTo(HaveOccurred(), notes)
		Expect(notes).To(ContainSubstring("to do: MultiKueueCluster west: spec.kubeConfig: copy Secret west-kubeconfig"))
		objs := decodeAll(out)
		applyAll(ctx, hub, objs)
		var wcs []string
		for _, o := range objs {
			if o.GetKind() == "WorkerCluster" {
				wcs = append(wcs, o.GetName())
				Expect(o.GetLabels()).To(HaveKeyWithValue("multikueue-config.strata.dev/gpu-fleet", "true"))
			}
		}
		Expect(wcs).To(ConsistOf("east", "west"))
	})

	It("reads the same objects from a live cluster with --from-cluster", func(ctx SpecContext) {
		By("Kueue's CRDs and the worker example on a cluster")
		sch := runtime.NewScheme()
		Expect(apiextensionsv1.AddToScheme(sch)).To(Succeed())
		crds, err := client.New(hub.Config, client.Options{Scheme: sch})
		Expect(err).NotTo(HaveOccurred())
		for _, crd := range []*apiextensionsv1.CustomResourceDefinition{
			kueueCRD("Topology", "topologies", false), kueueCRD("ResourceFlavor", "resourceflavors", false),
			kueueCRD("ClusterQueue", "clusterqueues", false), kueueCRD("LocalQueue", "localqueues", true),
			kueueCRD("WorkloadPriorityClass", "workloadpriorityclasses", false),
		} {
			Expect(crds.Create(ctx, crd)).To(Succeed())
		}
		data, err := os.ReadFile(kueueExample("worker.yaml"))
		Expect(err).NotTo(HaveOccurred())
		kueueObjs := decodeAll(string(data))
		Eventually(func(g Gomega) {
			for _, o := range kueueObjs {
				err := hub.Client.Create(ctx, o.DeepCopy())
				if !apierrors.IsAlreadyExists(err) {
					g.Expect(err).NotTo(HaveOccurred())
				}
			}
		}).Should(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			for _, o := range kueueObjs {
				Expect(client.IgnoreNotFound(hub.Client.Delete(ctx, o.DeepCopy()))).To(Succeed())
			}
			for _, crd := range []string{"topologies", "resourceflavors", "clusterqueues", "localqueues", "workloadpriorityclasses"} {
				Expect(client.IgnoreNotFound(crds.Delete(ctx, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: crd + ".kueue.x-k8s.io"}}))).To(Succeed())
			}
		})

		fromFiles, _, err := runSplit(ctx, "migrate", "-f", kueueExample("worker.yaml"))
		Expect(err).NotTo(HaveOccurred())
		var live string
		Eventually(func(g Gomega) {
			var notes string
			live, notes, err = runSplit(ctx, "migrate", "--from-cluster", "--kubeconfig", hub.KubeconfigPath)
			g.Expect(err).NotTo(HaveOccurred(), notes)
			g.Expect(decodeAll(live)).To(HaveLen(len(decodeAll(fromFiles))))
		}).Should(Succeed())
		Expect(stripServerFields(decodeAll(live))).To(Equal(stripServerFields(decodeAll(fromFiles))))
	})

	It("says what it needs", func(ctx SpecContext) {
		_, _, err := runSplit(ctx, "migrate")
		Expect(err).To(MatchError(ContainSubstring("pass the Kueue objects with -f FILE_OR_DIR, or read them from the cluster with --from-cluster")))
		_, _, err = runSplit(ctx, "migrate", "--from-cluster", "--kubeconfig", worker.KubeconfigPath)
		Expect(err).To(MatchError(ContainSubstring("serves no Kueue API (kueue.x-k8s.io): is Kueue installed there?")))
	})
})

// stripServerFields drops what the API server adds to the objects read
// live (labels and annotations stay): the output of --from-cluster then
// compares with the output of the files.
func stripServerFields(objs []*unstructured.Unstructured) []map[string]any {
	out := make([]map[string]any, len(objs))
	for i, o := range objs {
		m := o.DeepCopy().Object
		for _, f := range []string{"uid", "resourceVersion", "generation", "managedFields", "creationTimestamp"} {
			unstructured.RemoveNestedField(m, "metadata", f)
		}
		out[i] = m
	}
	return out
}
