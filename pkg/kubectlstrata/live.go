package kubectlstrata

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/scheme"
)

// liveFlags are the flags of the commands that read a live cluster.
type liveFlags struct {
	kubeconfig string
	context    string
	namespace  string
	output     string
}

// add registers the flags on cmd; -n/--namespace only when the command
// reads namespaced objects.
func (f *liveFlags) add(cmd *cobra.Command, namespaced bool) {
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
	cmd.Flags().StringVar(&f.context, "context", "", "the kubeconfig context to use (default: the current context)")
	if namespaced {
		cmd.Flags().StringVarP(&f.namespace, "namespace", "n", "", "namespace (default: the context's namespace)")
	}
	cmd.Flags().StringVarP(&f.output, "output", "o", "table", "output format: table, json or yaml")
}

// session is a connection to the cluster a command reads.
type session struct {
	client    client.Client
	namespace string
	// where names the cluster in messages: the context and the server.
	where string
	// config is the agent's (or hub's) configuration a command was given
	// (--config), read from configFrom; nil: read it from the cluster.
	config     []byte
	configFrom string
}

// connect loads the kubeconfig the way kubectl does (--kubeconfig, else
// $KUBECONFIG, else ~/.kube/config; --context, else the current context)
// and returns a client with Strata's scheme, after checking the output
// format. No request is made yet.
func (f *liveFlags) connect() (*session, error) {
	if err := checkFormat(f.output); err != nil {
		return nil, err
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: f.context}
	overrides.Context.Namespace = f.namespace
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, errors.New("no kubeconfig: pass --kubeconfig, set KUBECONFIG or create ~/.kube/config")
		}
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	contextName := f.context
	if contextName == "" {
		if raw, err := cc.RawConfig(); err == nil {
			contextName = raw.CurrentContext
		}
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", cfg.Host, err)
	}
	where := cfg.Host
	if contextName != "" {
		where = fmt.Sprintf("context %q (%s)", contextName, cfg.Host)
	}
	return &session{client: c, namespace: ns, where: where}, nil
}

// Messages for clusters that lack Strata's CRDs.
const (
	noStrataCRDs = "this cluster has no Strata CRDs (strata.dev): install the strata-agent or strata-hub chart"
	notAHub      = "this cluster has no WorkerCluster CRD (strata.dev): it is not a Strata hub; " +
		"install the strata-hub chart, or on a worker use 'kubectl strata topology'"
)

// apiError turns an error of reading resource (e.g. "workerclusters") of
// kind from the cluster at where into advice: a cluster without the CRD,
// credentials that are refused or lack a permission, a server that does
// not answer.
func apiError(err error, kind, resource, where string) error {
	switch {
	case err == nil:
		return nil
	case meta.IsNoMatchError(err):
		if kind == "WorkerCluster" {
			return errors.New(notAHub)
		}
		return errors.New(noStrataCRDs)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("the API server at %s does not accept your credentials: log in again or pick another --context (%w)", where, err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("you may not list %s.%s on %s: ask for read access (%w)", resource, groupOf(kind), where, err)
	}
	return fmt.Errorf("reading %s from %s: %w", resource, where, err)
}

// groupOf is the API group of the kinds the commands read.
func groupOf(kind string) string {
	if kind == "Job" {
		return "batch"
	}
	return strata.GroupVersion.Group
}

// isHub says whether the cluster is a Strata hub: it serves
// WorkerClusters (false when their CRD is not installed).
func (s *session) isHub() (bool, error) {
	_, err := s.client.RESTMapper().RESTMapping(schema.GroupKind{Group: strata.GroupVersion.Group, Kind: "WorkerCluster"}, strata.GroupVersion.Version)
	if meta.IsNoMatchError(err) {
		return false, nil
	}
	return err == nil, err
}

// worker returns a session on the worker of WorkerCluster name, from the
// hub s reaches, with the kubeconfig Secret the WorkerCluster names.
func (s *session) worker(ctx context.Context, name string) (*session, error) {
	var wc strata.WorkerCluster
	if err := s.client.Get(ctx, types.NamespacedName{Name: name}, &wc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("no WorkerCluster %s on %s ('kubectl strata clusters' lists them)", name, s.where)
		}
		return nil, apiError(err, "WorkerCluster", "workerclusters", s.where)
	}
	ref := wc.Spec.KubeConfigSecretRef
	if ref == nil {
		return nil, fmt.Errorf("WorkerCluster %s is not registered through a kubeconfig Secret: run 'kubectl strata topology' with the worker's own kubeconfig", name)
	}
	var secret corev1.Secret
	if err := s.client.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, &secret); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("WorkerCluster %s names Secret %s/%s, which does not exist", name, ref.Namespace, ref.Name)
		case apierrors.IsForbidden(err):
			return nil, fmt.Errorf("you may not get Secret %s/%s on %s, the hub's credential for %s: use the worker's own kubeconfig", ref.Namespace, ref.Name, s.where, name)
		}
		return nil, fmt.Errorf("reading Secret %s/%s from %s: %w", ref.Namespace, ref.Name, s.where, err)
	}
	key := ref.Key
	if key == "" {
		key = "kubeconfig"
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data[key])
	if err != nil {
		return nil, fmt.Errorf("the Secret %s/%s has no usable kubeconfig under key %q: %w", ref.Namespace, ref.Name, key, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, fmt.Errorf("connecting to %s at %s: %w", name, cfg.Host, err)
	}
	return &session{client: c, where: fmt.Sprintf("worker %s (%s)", name, cfg.Host)}, nil
}
