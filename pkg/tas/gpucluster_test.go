package tas

import (
	"fmt"
	"math/rand/v2"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

const gpu corev1.ResourceName = "nvidia.com/gpu"

// gpuPod is the requests of a pod of g GPUs with proportional CPU and
// memory (one CPU and 8 GiB per GPU).
func gpuPod(g int64) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(g, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(g<<33, resource.BinarySI),
		gpu:                   *resource.NewQuantity(g, resource.DecimalSI),
	}
}

// gpuClusterOptions shape a generated GPU cluster.
type gpuClusterOptions struct {
	nodes int
	// hostLowest: levels block/rack/host, else block/rack.
	hostLowest bool
	// busy is the share of nodes with pods on them.
	busy float64
	// memoryJitter gives every node a slightly different memory size.
	memoryJitter bool
	// notReady is the share of nodes that are not Ready.
	notReady float64
	// tainted is the share of nodes tainted nvidia.com/gpu=present:NoSchedule.
	tainted float64
	// labelled: nodes carry labels besides the topology's (see nodeLabels).
	labelled bool
}

// gpuCluster is a cluster of 8-GPU nodes (8 CPU, 64 GiB, 110 pods), 16
// nodes per rack and 16 racks per block, with usage drawn at random from
// whole pods of 1, 2, 4 or 8 GPUs, so that free vectors repeat as they do
// in real GPU clusters. Node names follow the topology's name order.
// nodeLabels are a generated node's labels: the topology's and, when
// labelled, those a cloud's GPU nodes carry — the same on every node
// (instance type, OS), a GPU model per block, and a unique node ID.
func nodeLabels(o gpuClusterOptions, i int, name string) map[string]string {
	l := map[string]string{
		block: fmt.Sprintf("block-%d", i/256),
		rack:  fmt.Sprintf("rack-%d", i/16%16),
		host:  name,
	}
	if o.labelled {
		l["node.kubernetes.io/instance-type"] = "gpu-8x"
		l["kubernetes.io/os"] = "linux"
		l["gpu.example/model"] = []string{"a100", "h100"}[i/256%2]
		l["node.example/id"] = fmt.Sprintf("i-%08x", i)
	}
	return l
}

func gpuCluster(rng *rand.Rand, o gpuClusterOptions) *Snapshot {
	levels := []string{block, rack}
	if o.hostLowest {
		levels = append(levels, host)
	}
	s := NewSnapshot(levels, nil)
	for i := range o.nodes {
		name := fmt.Sprintf("node-%05d", i)
		mem := int64(64 << 30)
		if o.memoryJitter {
			mem -= int64(rng.IntN(1<<20)) * 4096
		}
		s.SetNode(Node{
			Name:   name,
			Labels: nodeLabels(o, i, name),
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("8"),
				corev1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI),
				corev1.ResourcePods:   resource.MustParse("110"),
				gpu:                   resource.MustParse("8"),
			},
			Ready:  rng.Float64() >= o.notReady,
			Taints: gpuTaints(rng.Float64() < o.tainted),
		})
		if rng.Float64() >= o.busy {
			continue
		}
		free := int64(8)
		for free > 0 && rng.IntN(4) > 0 {
			g := []int64{1, 2, 4, 8}[rng.IntN(4)]
			if g > free {
				continue
			}
			s.AddUsage(name, WithPod(gpuPod(g)), 1)
			free -= g
		}
	}
	return s
}

// gpuTaints are the taints of a GPU node reserved for pods that tolerate
// them, when tainted.
func gpuTaints(tainted bool) []corev1.Taint {
	if !tainted {
		return nil
	}
	return []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}
}
