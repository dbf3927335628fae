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

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/jobs/kinds"
	strataqueue "strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/scheme"
)

// Input is a cluster and the workloads to place on it, in file order.
type Input struct {
	Nodes         []corev1.Node
	Pods          []corev1.Pod
	Topologies    map[string]*strata.Topology
	Flavors       []*strata.ResourceFlavor
	ClusterQueues map[string]*strata.ClusterQueue
	// Cohorts give cohorts quota and parents.
	Cohorts []*strata.Cohort
	// LocalQueues by namespace/name.
	LocalQueues map[string]*strata.LocalQueue
	// WorkloadPriorityClasses and PriorityClasses give workloads their
	// priority; a class not in the input counts as priority 0.
	WorkloadPriorityClasses map[string]*strata.WorkloadPriorityClass
	PriorityClasses         map[string]*schedulingv1.PriorityClass
	// AdmissionChecks by name: a ClusterQueue's ProvisioningRequest check
	// delays the topology assignment on its flavors (KEP-2724), so such a
	// workload reserves quota alone; every other check is taken as Ready.
	AdmissionChecks map[string]*strata.AdmissionCheck
	// Namespaces give their labels to the ClusterQueues' namespace
	// selectors; a namespace not in the input is not checked against a
	// selector that names labels.
	Namespaces map[string]*corev1.Namespace
	// Workloads are placed in order. Those with a status.admission are
	// running already: they hold their capacity (placed first, in order,
	// where their admission has no topology assignment) and may be
	// preempted.
	Workloads []Item
	// FairSharing is the agent configuration's fairSharing: nil leaves
	// fair sharing off, as on an agent.
	FairSharing *configv1beta1.FairSharing
	// AdmissionFairSharing is the agent configuration's
	// admissionFairSharing: with it, a ClusterQueue whose admissionScope
	// asks for it orders its workloads by the consumed usage in their
	// LocalQueues' status (and what the simulation admits from them).
	AdmissionFairSharing *configv1beta1.AdmissionFairSharing
	// sources says where each object was read, by kind and name.
	sources map[string]string
	// seen says where each object was read, by kind, namespace and name.
	seen map[string]string
}

// Item is one workload to place: a job of a registered kind (a Job, a
// JobSet, a group of a LeaderWorkerSet, ...) or a Workload, and where it
// came from.
type Item struct {
	Job      jobs.Job
	Workload *strata.Workload
	Source   string // "file.yaml: Job ml/train"

	// whole is, when Job is one group of a job a worker admits as several
	// (a LeaderWorkerSet), that job as the hub takes it in; group is the
	// group's index. A job of no group is an Item of whole alone (Job
	// and Workload nil): a worker has nothing of it to admit.
	whole jobs.Job
	group int
}

var decoder = serializer.NewCodecFactory(scheme.New()).UniversalDeserializer()

// Load reads the files, and the .yaml/.yml/.json files of the directories,
// in order.
func Load(paths ...string) (*Input, error) {
	in := &Input{Topologies: map[string]*strata.Topology{}, ClusterQueues: map[string]*strata.ClusterQueue{}, LocalQueues: map[string]*strata.LocalQueue{},
		AdmissionChecks: map[string]*strata.AdmissionCheck{}, WorkloadPriorityClasses: map[string]*strata.WorkloadPriorityClass{}, PriorityClasses: map[string]*schedulingv1.PriorityClass{}, Namespaces: map[string]*corev1.Namespace{}, sources: map[string]string{}, seen: map[string]string{}}
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

// readKinds are the kinds simulate reads: the cluster's, the registered
// workload kinds' and Workloads.
func readKinds() string {
	out := []string{"Node", "Pod", "Namespace", "Topology", "ResourceFlavor", "ClusterQueue", "Cohort", "LocalQueue", "AdmissionCheck", "ProvisioningRequestConfig", "WorkloadPriorityClass", "PriorityClass"}
	for _, r := range kinds.Registered {
		out = append(out, r.Kind.GroupVersionKind().Kind)
	}
	return strings.Join(append(out, "Workload", "and lists of them"), ", ")
}

func (in *Input) add(raw []byte, where string) error {
	obj, gvk, err := decoder.Decode(raw, nil, nil)
	if err != nil {
		if runtime.IsNotRegisteredError(err) || runtime.IsMissingKind(err) {
			return fmt.Errorf("%s: %w; simulate reads %s", where, err, readKinds())
		}
		return fmt.Errorf("%s: %w", where, err)
	}
	if o, ok := obj.(client.Object); ok && !meta.IsListType(obj) && o.GetName() != "" {
		// The same object twice (a file given twice, or in two
		// directories): counted twice, or the last one kept, it would
		// not be the cluster the files describe.
		key := gvk.Kind + " " + objectName(o)
		if first, dup := in.seen[key]; dup {
			return fmt.Errorf("%s: %s is also in %s; give each object once", where, key, first)
		}
		in.seen[key] = where
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
	case *corev1.Namespace:
		// The API server labels every namespace with its name.
		metav1.SetMetaDataLabel(&o.ObjectMeta, corev1.LabelMetadataName, o.Name)
		in.Namespaces[o.Name] = o
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
	case *strata.Cohort:
		in.Cohorts = append(in.Cohorts, o)
	case *strata.AdmissionCheck:
		in.AdmissionChecks[o.Name] = o
	case *strata.ProvisioningRequestConfig:
		// Its check's parameters: what the autoscaler is asked for, not
		// simulated.
	case *strata.LocalQueue:
		in.LocalQueues[o.Namespace+"/"+o.Name] = o
	case *strata.WorkloadPriorityClass:
		in.WorkloadPriorityClasses[o.Name] = o
	case *schedulingv1.PriorityClass:
		in.PriorityClasses[o.Name] = o
	case *strata.Workload:
		in.Workloads = append(in.Workloads, Item{Workload: o, Source: fmt.Sprintf("%s (Workload %s)", where, objectName(o))})
	default:
		if ok, err := in.addJobs(obj, gvk, where); ok || err != nil {
			return err
		}
		return fmt.Errorf("%s: %s is not read by simulate; it reads %s", where, gvk.Kind, readKinds())
	}
	return nil
}

// objectName is "namespace/name", or the name of a cluster-scoped object.
func objectName(o metav1.Object) string {
	if o.GetNamespace() != "" {
		return o.GetNamespace() + "/" + o.GetName()
	}
	return o.GetName()
}

// addJobs adds obj, of kind gvk, when it is an object or a list of a
// registered kind; false when it is neither.
func (in *Input) addJobs(obj runtime.Object, gvk *schema.GroupVersionKind, where string) (bool, error) {
	for _, r := range kinds.Registered {
		k := r.Kind.GroupVersionKind()
		if gvk.Group != k.Group {
			continue
		}
		switch gvk.Kind {
		case k.Kind:
			return in.addJob(r.Kind, obj, where), nil
		case k.Kind + "List":
			items, err := meta.ExtractList(obj)
			if err != nil {
				return false, fmt.Errorf("%s: %w", where, err)
			}
			for _, item := range items {
				if !in.addJob(r.Kind, item, where) {
					return false, nil
				}
			}
			return true, nil
		}
	}
	return false, nil
}

// addJob adds a job of kind k; a job a worker admits as several groups
// (a LeaderWorkerSet) adds its groups, each a workload of its own, placed
// in turn, as an agent admits them. False when obj is not of kind k.
func (in *Input) addJob(k jobs.Kind, obj runtime.Object, where string) bool {
	o, ok := obj.(client.Object)
	if !ok {
		return false
	}
	j, ok := k.Adapt(o)
	if !ok {
		return false
	}
	kind := k.GroupVersionKind().Kind
	grouped, ok := k.(jobs.GroupedWorkloads)
	if !ok {
		in.Workloads = append(in.Workloads, Item{Job: j, Source: fmt.Sprintf("%s (%s %s)", where, kind, objectName(o))})
		return true
	}
	groups := grouped.WorkerJobs(o)
	if len(groups) == 0 {
		// No group (a LeaderWorkerSet of replicas 0): nothing for a
		// worker to admit, but the hub still takes the job in (and marks
		// it invalid).
		in.Workloads = append(in.Workloads, Item{whole: j, Source: fmt.Sprintf("%s (%s %s)", where, kind, objectName(o))})
	}
	for g, group := range groups {
		in.Workloads = append(in.Workloads, Item{Job: group, whole: j, group: g,
			Source: fmt.Sprintf("%s (%s %s, group %d)", where, kind, objectName(o), g)})
	}
	return true
}

// namespaceRefused says why ClusterQueue cq admits no workload of
// namespace ns, as the agent's intake says it ("" when it does, or cannot
// be told: a selector that names labels, and the namespace not in the
// input).
func (in *Input) namespaceRefused(ns string, cq *strata.ClusterQueue) string {
	if cq == nil {
		return ""
	}
	var nsLabels map[string]string
	if n := in.Namespaces[ns]; n != nil {
		nsLabels = n.Labels
	} else if sel := cq.Spec.NamespaceSelector; sel != nil && (len(sel.MatchLabels) > 0 || len(sel.MatchExpressions) > 0) {
		return ""
	}
	lq := &strata.LocalQueue{Spec: strata.LocalQueueSpec{ClusterQueue: cq.Name}}
	if r := strataqueue.Resolve(ns, "", nsLabels, lq, cq); !r.OK() {
		return r.Message
	}
	return ""
}

// clusterQueueOf returns the ClusterQueue a workload's queue names (through
// its LocalQueue, or directly), nil when the input has none.
func (in *Input) clusterQueueOf(namespace, queue string) *strata.ClusterQueue {
	if lq, ok := in.LocalQueues[namespace+"/"+queue]; ok {
		queue = lq.Spec.ClusterQueue
	}
	return in.ClusterQueues[queue]
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
	for _, fq := range strataqueue.Flavors(cq) {
		i := slices.IndexFunc(in.Flavors, func(f *strata.ResourceFlavor) bool { return f.Name == fq.Name })
		if i < 0 {
			return nil, fmt.Errorf("ClusterQueue %q lists flavor %q, which is not in the input", queue, fq.Name)
		}
		out = append(out, in.Flavors[i])
	}
	return out, nil
}
