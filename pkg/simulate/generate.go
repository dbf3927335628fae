package simulate

import (
	"fmt"
	"io"
	"math/rand/v2"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	strata "strata.dev/strata/api/v1beta1"
)

// Node labels of a generated cluster.
const (
	GeneratedBlockLabel = "cloud.provider.com/topology-block"
	GeneratedRackLabel  = "cloud.provider.com/topology-rack"
)

// ClusterOptions shape a generated GPU cluster.
type ClusterOptions struct {
	// Name prefixes the nodes' names.
	Name string
	// Nodes is the number of 8-GPU hosts, 16 to a rack, 8 racks to a
	// block.
	Nodes int
	// Busy is the share of hosts that run a pod of 1, 2 or 4 GPUs of
	// someone else's, for good: the fragmentation a replay starts from.
	Busy float64
	// Seed draws the busy hosts.
	Seed uint64
}

// GenerateCluster writes a cluster for simulate --cluster: the Topology
// "default" (block, rack, host), the ResourceFlavor "gpu", the Nodes, and
// the busy hosts' Pods.
func GenerateCluster(w io.Writer, o ClusterOptions) error {
	if o.Nodes < 1 {
		return fmt.Errorf("a generated cluster needs at least 1 node, not %d", o.Nodes)
	}
	if o.Busy < 0 || o.Busy > 1 {
		return fmt.Errorf("the busy share of hosts is %v; want 0 to 1", o.Busy)
	}
	name := o.Name
	if name == "" {
		name = "gpu"
	}
	topology := &strata.Topology{TypeMeta: metav1.TypeMeta{APIVersion: strata.GroupVersion.String(), Kind: "Topology"},
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: strata.TopologySpec{Levels: []strata.TopologyLevel{
			{NodeLabel: GeneratedBlockLabel}, {NodeLabel: GeneratedRackLabel}, {NodeLabel: strata.HostnameLabel},
		}}}
	flavor := &strata.ResourceFlavor{TypeMeta: metav1.TypeMeta{APIVersion: strata.GroupVersion.String(), Kind: "ResourceFlavor"},
		ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec:       strata.ResourceFlavorSpec{TopologyName: ptr.To("default")}}
	nodes := &corev1.NodeList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}}
	pods := &corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}}
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0xc1))
	alloc := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("96"), corev1.ResourceMemory: resource.MustParse("1Ti"),
		"nvidia.com/gpu": resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110"),
	}
	for i := range o.Nodes {
		node := fmt.Sprintf("%s-b%d-r%d-h%d", name, i/128, i/16%8, i%16)
		nodes.Items = append(nodes.Items, corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{
				GeneratedBlockLabel: fmt.Sprintf("b%d", i/128), GeneratedRackLabel: fmt.Sprintf("b%d-r%d", i/128, i/16%8), strata.HostnameLabel: node,
			}},
			Status: corev1.NodeStatus{Allocatable: alloc, Capacity: alloc, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
		})
		if rng.Float64() >= o.Busy {
			continue
		}
		gpus := []int64{1, 2, 4}[rng.IntN(3)]
		pods.Items = append(pods.Items, corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: node + "-other", Namespace: "other"},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main", Image: "other",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning},
		})
	}
	docs := []any{topology, flavor, nodes}
	if len(pods.Items) > 0 {
		docs = append(docs, pods)
	}
	for i, d := range docs {
		b, err := yaml.Marshal(d)
		if err != nil {
			return err
		}
		if i > 0 {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}
