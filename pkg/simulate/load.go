// Package simulate places workloads on a cluster described by files, with
// the same engine the agent runs: the offline face of Strata
// ("kubectl strata simulate").
package simulate

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	lwsapi "sigs.k8s.io/lws/api/leaderworkerset/v1"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/jobs/batchjob"
	"strata.dev/strata/pkg/jobs/jobset"
	"strata.dev/strata/pkg/jobs/lws"
	"strata.dev/strata/pkg/jobs/mpijob"
	"strata.dev/strata/pkg/scheme"
)

// Input is a cluster and the workloads to place on it, in file order.
type Input struct {
	Nodes         []corev1.Node
	Pods          []corev1.Pod
	Topologies    map[string]*strata.Topology
	Flavors       []*strata.ResourceFlavor
	ClusterQueues map[string]*strata.ClusterQueue
	// LocalQueues by namespace/name.
	LocalQueues map[string]*strata.LocalQueue
	Workloads   []Item
	// sources says where each object was read, by kind and name.
	sources map[string]string
}

// Item is one workload to place: a job of a supported kind (a Job, a
// JobSet) or a Workload, and where it came from.
type Item struct {
	Job      jobs.Job
	Workload *strata.Workload
	Source   string // "file.yaml: Job ml/train"
}

var decoder = serializer.NewCodecFactory(scheme.New()).UniversalDeserializer()

// Load reads the files, and the .yaml/.yml/.json files of the directories,
// in order.
func Load(paths ...string) (*Input, error) {
	in := &Input{Topologies: map[string]*strata.Topology{}, ClusterQueues: map[string]*strata.ClusterQueue{}, LocalQueues: map[string]*strata.LocalQueue{}, sources: map[string]string{}}
	for _, p := range paths {
		files, err := expand(p)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			if err := in.loadFile(f); err != nil {
				return nil, err
			}
		}
	}
	return in, nil
}

func expand(p string) ([]string, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return []string{p}, nil
	}
	entries, err := os.ReadDir(p)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		switch strings.ToLower(filepath.Ext(e.Name())) {
		case ".yaml", ".yml", ".json":
			if !e.IsDir() {
				files = append(files, filepath.Join(p, e.Name()))
			}
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no .yaml, .yml or .json files", p)
	}
	return files, nil
}

func (in *Input) loadFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for doc := 1; ; doc++ {
		var raw runtime.RawExtension
		if err := d.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("%s: document %d: %w", path, doc, err)
		}
		if len(bytes.TrimSpace(raw.Raw)) == 0 || string(bytes.TrimSpace(raw.Raw)) == "null" {
			continue
		}
		if err := in.add(raw.Raw, fmt.Sprintf("%s: document %d", path, doc)); err != nil {
			return err
		}
	}
}

// Kinds simulate reads.
var kinds = []string{"Node", "Pod", "Topology", "ResourceFlavor", "ClusterQueue", "LocalQueue", "Job", "JobSet", "MPIJob", "LeaderWorkerSet", "Workload", "and lists of them"}

func (in *Input) add(raw []byte, where string) error {
	obj, gvk, err := decoder.Decode(raw, nil, nil)
	if err != nil {
		if runtime.IsNotRegisteredError(err) || runtime.IsMissingKind(err) {
			return fmt.Errorf("%s: %w; simulate reads %s", where, err, strings.Join(kinds, ", "))
		}
		return fmt.Errorf("%s: %w", where, err)
	}
	name := func(o metav1.Object) string {
		if o.GetNamespace() != "" {
			return o.GetNamespace() + "/" + o.GetName()
		}
		return o.GetName()
	}
	switch o := obj.(type) {
	case *corev1.Node:
		in.sources["Node"] = where
		in.Nodes = append(in.Nodes, *o)
	case *corev1.NodeList:
		in.sources["Node"] = where
		in.Nodes = append(in.Nodes, o.Items...)
	case *corev1.Pod:
		in.Pods = append(in.Pods, *o)
	case *corev1.PodList:
		in.Pods = append(in.Pods, o.Items...)
	case *corev1.List:
		for i, item := range o.Items {
			if err := in.add(item.Raw, fmt.Sprintf("%s: item %d", where, i)); err != nil {
				return err
			}
		}
	case *strata.Topology:
		in.sources["Topology"] = where
		in.Topologies[o.Name] = o
	case *strata.ResourceFlavor:
		in.sources["ResourceFlavor"] = where
		in.Flavors = append(in.Flavors, o)
	case *strata.ClusterQueue:
		in.sources["ClusterQueue/"+o.Name] = where
		in.ClusterQueues[o.Name] = o
	case *strata.LocalQueue:
		in.LocalQueues[o.Namespace+"/"+o.Name] = o
	case *batchv1.Job:
		in.Workloads = append(in.Workloads, Item{Job: batchjob.Adapt(o), Source: fmt.Sprintf("%s (Job %s)", where, name(o))})
	case *batchv1.JobList:
		for i := range o.Items {
			j := &o.Items[i]
			in.Workloads = append(in.Workloads, Item{Job: batchjob.Adapt(j), Source: fmt.Sprintf("%s (Job %s)", where, name(j))})
		}
	case *jobsetapi.JobSet:
		in.Workloads = append(in.Workloads, Item{Job: jobset.Adapt(o), Source: fmt.Sprintf("%s (JobSet %s)", where, name(o))})
	case *jobsetapi.JobSetList:
		for i := range o.Items {
			j := &o.Items[i]
			in.Workloads = append(in.Workloads, Item{Job: jobset.Adapt(j), Source: fmt.Sprintf("%s (JobSet %s)", where, name(j))})
		}
	case *kubeflow.MPIJob:
		in.Workloads = append(in.Workloads, Item{Job: mpijob.Adapt(o), Source: fmt.Sprintf("%s (MPIJob %s)", where, name(o))})
	case *kubeflow.MPIJobList:
		for i := range o.Items {
			j := &o.Items[i]
			in.Workloads = append(in.Workloads, Item{Job: mpijob.Adapt(j), Source: fmt.Sprintf("%s (MPIJob %s)", where, name(j))})
		}
	case *lwsapi.LeaderWorkerSet:
		in.addLeaderWorkerSet(o, where, name(o))
	case *lwsapi.LeaderWorkerSetList:
		for i := range o.Items {
			in.addLeaderWorkerSet(&o.Items[i], where, name(&o.Items[i]))
		}
	case *strata.Workload:
		in.Workloads = append(in.Workloads, Item{Workload: o, Source: fmt.Sprintf("%s (Workload %s)", where, name(o))})
	default:
		return fmt.Errorf("%s: %s is not read by simulate; it reads %s", where, gvk.Kind, strings.Join(kinds, ", "))
	}
	return nil
}

// addLeaderWorkerSet adds a LeaderWorkerSet's groups: each is a workload
// of its own, placed in turn, as an agent admits them.
func (in *Input) addLeaderWorkerSet(l *lwsapi.LeaderWorkerSet, where, name string) {
	for g := range lws.Replicas(l) {
		in.Workloads = append(in.Workloads, Item{Job: lws.Group{LeaderWorkerSet: l, Index: g},
			Source: fmt.Sprintf("%s (LeaderWorkerSet %s, group %d)", where, name, g)})
	}
}

// flavorOrder returns the flavors to try for a workload's queue: the
// ClusterQueue's order when the queue is given, else the flavors in file
// order. The queue name is a LocalQueue of the workload's namespace, as on
// a cluster, when the input has that LocalQueue; without it, the name is
// taken as the ClusterQueue's (so that a cluster dump without LocalQueues
// still works).
func (in *Input) flavorOrder(namespace, queue string) ([]*strata.ResourceFlavor, error) {
	what := fmt.Sprintf("neither LocalQueue %s/%s nor ClusterQueue %q is in the input", namespace, queue, queue)
	if lq, ok := in.LocalQueues[namespace+"/"+queue]; ok {
		queue = lq.Spec.ClusterQueue
		what = fmt.Sprintf("ClusterQueue %q of LocalQueue %s/%s is not in the input", queue, lq.Namespace, lq.Name)
	}
	cq, ok := in.ClusterQueues[queue]
	if !ok {
		if len(in.ClusterQueues) > 0 {
			names := make([]string, 0, len(in.ClusterQueues))
			for n := range in.ClusterQueues {
				names = append(names, n)
			}
			slices.Sort(names)
			return nil, fmt.Errorf("%s (ClusterQueues: %s)", what, strings.Join(names, ", "))
		}
		return in.Flavors, nil
	}
	var out []*strata.ResourceFlavor
	for _, fq := range cq.Spec.Flavors {
		i := slices.IndexFunc(in.Flavors, func(f *strata.ResourceFlavor) bool { return f.Name == fq.Name })
		if i < 0 {
			return nil, fmt.Errorf("ClusterQueue %q lists flavor %q, which is not in the input", queue, fq.Name)
		}
		out = append(out, in.Flavors[i])
	}
	return out, nil
}
