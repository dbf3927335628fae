package framework

import (
	"context"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"strata.dev/strata/pkg/cmdutil"
	"strata.dev/strata/pkg/jobs/kinds"
	"strata.dev/strata/pkg/scheme"
)

// NewManager returns a manager on cfg for controllers under test: Strata's
// scheme, no metrics or probe listeners, controller names that may repeat
// in the process (agents of several workers, a restarted hub), and, as in
// the binaries, informers that start from the watch cache's lists
// (cmdutil.InitialListsFromCache).
func NewManager(cfg *rest.Config) (ctrl.Manager, error) {
	if err := cmdutil.InitialListsFromCache(os.LookupEnv); err != nil {
		return nil, err
	}
	return ctrl.NewManager(cfg, options())
}

// NewHubManager is NewManager with the hub's informers as strata-hub has
// them (kinds.HubTransform: lean pod templates).
func NewHubManager(cfg *rest.Config) (ctrl.Manager, error) {
	if err := cmdutil.InitialListsFromCache(os.LookupEnv); err != nil {
		return nil, err
	}
	opts := options()
	opts.Cache.DefaultTransform = kinds.HubTransform()
	return ctrl.NewManager(cfg, opts)
}

func options() ctrl.Options {
	return ctrl.Options{
		Scheme:                 scheme.New(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	}
}

// Run starts mgr with a context it cancels in the function it returns,
// which waits for mgr to stop and returns its error.
func Run(ctx context.Context, mgr ctrl.Manager) (stop func() error) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return func() error {
		cancel()
		return <-done
	}
}

// CreateReadyNode creates a Ready, untainted node with labels and cpu CPUs
// (110 pods), as a kubelet and the node lifecycle controller would leave it.
func CreateReadyNode(ctx context.Context, c client.Client, name string, labels map[string]string, cpu string) error {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := c.Create(ctx, n); err != nil {
		return err
	}
	n.Status = corev1.NodeStatus{
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourcePods: resource.MustParse("110")},
		Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourcePods: resource.MustParse("110")},
		Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}},
	}
	if err := c.Status().Update(ctx, n); err != nil {
		return err
	}
	// The API server taints new nodes not-ready; the node lifecycle
	// controller, which envtest does not run, removes the taint once Ready.
	n.Spec.Taints = nil
	return c.Update(ctx, n)
}
