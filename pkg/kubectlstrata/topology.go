package kubectlstrata

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/summarycopy"
	"strata.dev/strata/pkg/tas"
)

// TopologyView is what 'kubectl strata topology' shows: per flavor, the
// domain tree of the worker's capacity summary.
type TopologyView struct {
	Flavors []FlavorTopologyView `json:"flavors"`
	// Problem says why there is no flavor to show.
	Problem string `json:"problem,omitempty"`
}

// noCopies is the dashboard's message for a worker the hub keeps no copy
// of the summaries of.
const noCopies = "the hub keeps no copy of %s's capacity summaries yet: the hub copies them once it has read them (see its WorkerCluster's SummariesFresh condition), unless its dispatch.summaryCopyInterval is 0"

// FlavorTopologyView is one CapacitySummary as a tree of domains.
type FlavorTopologyView struct {
	Flavor       string       `json:"flavor"`
	Generation   int64        `json:"generation"`
	ObservedTime *metav1.Time `json:"observedTime,omitempty"`
	// Levels are the Topology's levels, highest first; the tree has the
	// domains of the first LeafLevels of them (hosts are not listed).
	Levels     []string `json:"levels"`
	LeafLevels int32    `json:"leafLevels"`
	// Resource is the one the table draws: a GPU, else the first extended
	// resource, else cpu.
	Resource corev1.ResourceName `json:"resource,omitempty"`
	// Ready is the summary's Ready condition.
	Ready *ConditionView `json:"ready,omitempty"`
	// Coarsened and Understated say what the summary rounded down to fit
	// its size budget.
	Coarsened   bool                         `json:"coarsened,omitempty"`
	Understated []strata.UnderstatedResource `json:"understated,omitempty"`
	// Dispatches is the number of hub dispatches the free capacity counts.
	Dispatches int `json:"dispatches"`
	// InFlight is the number of the hub's in-flight reservations' pods
	// on the flavor (only on the hub's copies of summaries).
	InFlight int32 `json:"inFlight,omitempty"`
	// Taints are the sets of NoSchedule/NoExecute taints some schedulable
	// nodes carry (key=value:effect, joined by ", "): only pods that
	// tolerate a set use its nodes.
	Taints []string `json:"taints,omitempty"`
	// Problem says why there is no tree: the summary is not published yet
	// or does not decode.
	Problem string `json:"problem,omitempty"`
	// Root is the whole flavor, named after it.
	Root *DomainView `json:"root,omitempty"`
}

// DomainView is one topology domain with its nodes' free capacity and
// capacity when empty.
type DomainView struct {
	// Level is the node label key of the domain's level; empty for the
	// flavor's root.
	Level string `json:"level,omitempty"`
	Name  string `json:"name"`
	// Nodes counts all nodes; SchedulableNodes those that take pods (the
	// free capacity is theirs).
	Nodes            int32 `json:"nodes"`
	SchedulableNodes int32 `json:"schedulableNodes"`
	// TaintedNodes counts the schedulable nodes with taints (see
	// FlavorTopologyView.Taints).
	TaintedNodes int32               `json:"taintedNodes,omitempty"`
	Free         corev1.ResourceList `json:"free"`
	Capacity     corev1.ResourceList `json:"capacity"`
	// InFlight is what the hub's in-flight reservations take in the
	// domain: workloads it dispatched there that the summary does not
	// count yet. Only the hub's copies of summaries have it.
	InFlight *InFlightView `json:"inFlight,omitempty"`
	// Hosts, on a leaf domain, are its nodes grouped as the summary lists
	// them (summaries do not name hosts): the schedulable ones by free
	// capacity, then the unschedulable ones.
	Hosts    []HostsView   `json:"hosts,omitempty"`
	Children []*DomainView `json:"children,omitempty"`
}

// InFlightView is what the hub's in-flight reservations take in a domain.
type InFlightView struct {
	Workloads int32               `json:"workloads"`
	Pods      int32               `json:"pods"`
	Requests  corev1.ResourceList `json:"requests,omitempty"`
}

// DeepCopy copies the view.
func (v InFlightView) DeepCopy() *InFlightView {
	v.Requests = v.Requests.DeepCopy()
	return &v
}

// HostsView is a group of a leaf domain's nodes alike in a summary.
type HostsView struct {
	Nodes int32 `json:"nodes"`
	// Free is each node's free capacity; absent for unschedulable nodes.
	Free corev1.ResourceList `json:"free,omitempty"`
	// Tainted: the nodes carry NoSchedule or NoExecute taints.
	Tainted       bool `json:"tainted,omitempty"`
	Unschedulable bool `json:"unschedulable,omitempty"`
}

// summaryReady is the condition type of a complete, current summary (the
// agent's summary publisher sets it).
const summaryReady = "Ready"

// onHubWithoutCluster is the message of topology on a hub without
// --cluster.
const onHubWithoutCluster = "this is a hub: its workers publish the summaries; pass --cluster NAME to read one worker's (kubectl strata clusters lists them)"

// noSummaries is the message for a cluster without CapacitySummaries.
const noSummaries = "no CapacitySummary on this cluster: is strata-agent running here? (on a hub, use 'kubectl strata clusters')"

func newTopologyCommand() *cobra.Command {
	var (
		f       liveFlags
		flavor  string
		cluster string
	)
	cmd := &cobra.Command{
		Use:   "topology [--flavor FLAVOR] [--cluster WORKER] [--kubeconfig KUBECONFIG] [--context CTX] [-o table|json|yaml]",
		Short: "On a worker: free capacity per topology domain, from the agent's capacity summaries",
		Long: `topology reads the CapacitySummary objects strata-agent publishes on a
worker cluster, one per topology-aware flavor, and prints each flavor's
domain tree (blocks, racks, ... down to the lowest level above the host)
with every domain's free capacity of capacity when empty: a GPU, else the
first extended resource, else cpu, drawn as a bar, then pods and nodes.
The free capacity is the schedulable nodes'; summaries never overstate it.

Run it with a worker's kubeconfig, or on the hub with --cluster NAME: the
command reads the summaries from the worker with the hub's own credential
for it, the kubeconfig Secret its WorkerCluster names (you need get on
that Secret; workers registered through a ClusterProfile or an OCM
ManagedCluster are read with their own kubeconfig). When the worker
cannot be read that way, it shows the hub's copy of the worker's
summaries (CapacitySummaries labelled strata.dev/worker-cluster, at most
dispatch.summaryCopyInterval old, with the hub's in-flight reservations)
and says so on stderr.`,
		Example: `  kubectl strata topology --kubeconfig worker.kubeconfig
  kubectl strata topology --context w1 --flavor gpu-a100 -o yaml
  kubectl strata topology --kubeconfig hub.kubeconfig --cluster w1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := f.connect()
			if err != nil {
				return err
			}
			var list strata.CapacitySummaryList
			read := true
			if cluster != "" {
				ws, werr := s.worker(cmd.Context(), cluster)
				if werr != nil {
					// The hub's copy of the worker's summaries, when it
					// keeps one: no credential for the worker is needed.
					if err := s.client.List(cmd.Context(), &list, client.MatchingLabelsSelector{Selector: summarycopy.Of(cluster)}); err != nil || len(list.Items) == 0 {
						return werr
					}
					fmt.Fprintf(cmd.ErrOrStderr(), "Showing the hub's copy of %s's summaries (written at most every dispatch.summaryCopyInterval, with the hub's in-flight reservations), as the worker could not be read: %v\n", cluster, werr)
					read = false
				} else {
					s = ws
				}
			}
			// Not the copies a hub keeps of other workers' summaries, on a
			// cluster that is both.
			if read {
				if err := s.client.List(cmd.Context(), &list, client.MatchingLabelsSelector{Selector: summarycopy.Published()}); err != nil {
					return apiError(err, "CapacitySummary", "capacitysummaries", s.where)
				}
			}
			if len(list.Items) == 0 && cluster == "" {
				// On a hub the summaries are the workers': say how to read them.
				if hub, herr := s.isHub(); herr == nil && hub {
					return errors.New(onHubWithoutCluster)
				}
			}
			summaries, err := selectFlavor(list.Items, flavor)
			if err != nil {
				return err
			}
			v := newTopologyView(summaries)
			if f.output != "table" {
				return writeStructured(cmd.OutOrStdout(), v, f.output)
			}
			return writeTopology(cmd.OutOrStdout(), v, time.Now())
		},
	}
	f.add(cmd, false)
	cmd.Flags().StringVar(&flavor, "flavor", "", "show only this flavor")
	cmd.Flags().StringVar(&cluster, "cluster", "", "on a hub: the WorkerCluster whose summaries to show, read with the hub's kubeconfig Secret for it")
	return cmd
}

// selectFlavor keeps the summary of flavor, or all when flavor is empty;
// it says clearly when there is nothing to show.
func selectFlavor(items []strata.CapacitySummary, flavor string) ([]strata.CapacitySummary, error) {
	if len(items) == 0 {
		return nil, errors.New(noSummaries)
	}
	if flavor == "" {
		return items, nil
	}
	var names []string
	for _, cs := range items {
		if cs.Spec.Flavor == flavor {
			return []strata.CapacitySummary{cs}, nil
		}
		names = append(names, cs.Spec.Flavor)
	}
	slices.Sort(names)
	return nil, fmt.Errorf("no CapacitySummary of flavor %q on this cluster (it has %s)", flavor, strings.Join(names, ", "))
}

// newTopologyView builds the tree of every summary, by flavor.
func newTopologyView(items []strata.CapacitySummary) TopologyView {
	v := TopologyView{Flavors: make([]FlavorTopologyView, 0, len(items))}
	for i := range items {
		v.Flavors = append(v.Flavors, newFlavorTopology(&items[i]))
	}
	slices.SortFunc(v.Flavors, func(a, b FlavorTopologyView) int { return strings.Compare(a.Flavor, b.Flavor) })
	return v
}

// newFlavorTopology sums a summary's leaf domains up its levels. The
// summary is checked by decoding it as the hub does (tas), so that the
// tree never shows what the hub could not read.
func newFlavorTopology(cs *strata.CapacitySummary) FlavorTopologyView {
	st := &cs.Status
	v := FlavorTopologyView{
		Flavor:       cs.Spec.Flavor,
		Generation:   st.SummaryGeneration,
		ObservedTime: st.ObservedTime.DeepCopy(),
		Levels:       slices.Clone(st.Levels),
		LeafLevels:   st.LeafLevels,
		Resource:     tas.MainResource(st.Resources),
		Ready:        conditionOf(st.Conditions, summaryReady),
		Coarsened:    st.Coarsened,
		Understated:  slices.Clone(st.Understated),
		Dispatches:   len(st.Dispatches),
	}
	for _, set := range st.TaintSets {
		parts := make([]string, 0, len(set.Taints))
		for _, t := range set.Taints {
			parts = append(parts, t.ToString())
		}
		v.Taints = append(v.Taints, strings.Join(parts, ", "))
	}
	if len(st.Levels) == 0 {
		v.Problem = "not published yet: the summary has no levels"
		return v
	}
	if _, err := tas.NewSnapshotFromSummary(st); err != nil {
		v.Problem = "the summary does not decode: " + err.Error()
		return v
	}
	if _, err := tas.NewEmptySnapshotFromSummary(st); err != nil {
		v.Problem = "the summary does not decode: " + err.Error()
		return v
	}
	root := newSumNode("", cs.Spec.Flavor, len(st.Resources))
	leaves := map[string]*sumNode{}
	for _, d := range st.Domains {
		path := []*sumNode{root}
		n := root
		for l, value := range d.Values {
			n = n.child(st.Levels[l], value, len(st.Resources))
			path = append(path, n)
		}
		leaves[strings.Join(d.Values, "\x00")] = n
		var tainted int32
		for j, t := range d.FreeTaints {
			if t != 0 && 2*j+1 < len(d.Free) {
				tainted += d.Free[2*j+1]
			}
		}
		for _, p := range path {
			p.nodes += addPairs(p.capacity, d.Capacity, st.Vectors)
			p.schedulable += addPairs(p.free, d.Free, st.Vectors)
			p.tainted += tainted
		}
		n.hosts = append(n.hosts, hostGroups(&d, st)...)
	}
	for _, held := range st.InFlight {
		n := leaves[strings.Join(held.Values, "\x00")]
		if n == nil {
			continue // a domain the summary no longer lists
		}
		v.InFlight += held.Pods
		for p := n; p != nil; p = p.parent {
			p.inFlight.Workloads += held.Workloads
			p.inFlight.Pods += held.Pods
			for name, q := range held.Requests {
				if p.inFlight.Requests == nil {
					p.inFlight.Requests = corev1.ResourceList{}
				}
				sum := p.inFlight.Requests[name]
				sum.Add(q)
				p.inFlight.Requests[name] = sum
			}
		}
	}
	v.Root = root.view(st.Resources)
	return v
}

// hostGroups are a leaf domain's nodes as the summary groups them: its
// schedulable nodes by free vector and taints, then its unschedulable
// nodes (all nodes less the schedulable ones).
func hostGroups(d *strata.SummaryDomain, st *strata.CapacitySummaryStatus) []HostsView {
	var out []HostsView
	var schedulable, all int32
	for j := 0; j+1 < len(d.Free); j += 2 {
		h := HostsView{Nodes: d.Free[j+1], Free: corev1.ResourceList{}}
		vec := st.Vectors[d.Free[j]]
		for r, name := range st.Resources {
			if r < len(vec) {
				h.Free[name] = quantity(name, vec[r])
			}
		}
		h.Tainted = j/2 < len(d.FreeTaints) && d.FreeTaints[j/2] != 0
		schedulable += h.Nodes
		out = append(out, h)
	}
	for j := 1; j < len(d.Capacity); j += 2 {
		all += d.Capacity[j]
	}
	if all > schedulable {
		out = append(out, HostsView{Nodes: all - schedulable, Unschedulable: true})
	}
	return out
}

// sumNode is a domain while its sums are built.
type sumNode struct {
	level, name                 string
	nodes, schedulable, tainted int32
	free, capacity              []int64
	inFlight                    InFlightView
	hosts                       []HostsView
	parent                      *sumNode
	children                    []*sumNode
	index                       map[string]*sumNode
}

func newSumNode(level, name string, resources int) *sumNode {
	return &sumNode{level: level, name: name, free: make([]int64, resources), capacity: make([]int64, resources), index: map[string]*sumNode{}}
}

// child returns the child domain of that value, added after the others
// when new (summaries list domains in the topology's order).
func (n *sumNode) child(level, value string, resources int) *sumNode {
	c := n.index[value]
	if c == nil {
		c = newSumNode(level, value, resources)
		c.parent = n
		n.index[value] = c
		n.children = append(n.children, c)
	}
	return c
}

// addPairs adds to sums the vectors of pairs (position in vectors, node
// count) and returns the number of nodes.
func addPairs(sums []int64, pairs []int32, vectors []strata.ResourceVector) int32 {
	var nodes int32
	for i := 0; i+1 < len(pairs); i += 2 {
		vec, count := vectors[pairs[i]], pairs[i+1]
		for r := range sums {
			if r < len(vec) {
				sums[r] += vec[r] * int64(count)
			}
		}
		nodes += count
	}
	return nodes
}

func (n *sumNode) view(resources []corev1.ResourceName) *DomainView {
	d := &DomainView{Level: n.level, Name: n.name, Nodes: n.nodes, SchedulableNodes: n.schedulable, TaintedNodes: n.tainted,
		Free: corev1.ResourceList{}, Capacity: corev1.ResourceList{}}
	for r, name := range resources {
		d.Free[name] = quantity(name, n.free[r])
		d.Capacity[name] = quantity(name, n.capacity[r])
	}
	if n.inFlight.Workloads > 0 {
		d.InFlight = n.inFlight.DeepCopy()
	}
	d.Hosts = n.hosts
	for _, c := range n.children {
		d.Children = append(d.Children, c.view(resources))
	}
	return d
}

// quantity is a summary amount (milli-units): bytes in binary units, the
// rest in decimal ones.
func quantity(name corev1.ResourceName, milli int64) resource.Quantity {
	switch {
	case milli%1000 != 0:
	case name == corev1.ResourceMemory, name == corev1.ResourceEphemeralStorage, name == corev1.ResourceStorage,
		strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix):
		return *resource.NewQuantity(milli/1000, resource.BinarySI)
	}
	return *resource.NewMilliQuantity(milli, resource.DecimalSI)
}

// writeTopology prints every flavor's header and indented domain tree.
func writeTopology(w io.Writer, v TopologyView, now time.Time) error {
	for i, f := range v.Flavors {
		if i > 0 {
			if _, err := fmt.Fprintln(w); err != nil {
				return err
			}
		}
		if err := writeLines(w, flavorHeader(f, now)...); err != nil {
			return err
		}
		if f.Problem != "" || f.Root == nil {
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		writeDomain(tw, f.Root, f.Resource, 0)
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// flavorHeader is the lines above a flavor's tree: what the summary is
// and anything that makes it less than complete.
func flavorHeader(f FlavorTopologyView, now time.Time) []string {
	names := make([]string, len(f.Levels))
	for i, l := range f.Levels {
		names[i] = tas.LevelName(l)
	}
	head := fmt.Sprintf("Flavor %s: summary generation %d", f.Flavor, f.Generation)
	if f.ObservedTime != nil {
		head += fmt.Sprintf(", observed %s ago", age(f.ObservedTime, now))
	}
	if len(names) > 0 {
		head += "; levels " + strings.Join(names, " > ")
		if f.LeafLevels > 0 && int(f.LeafLevels) < len(names) {
			head += fmt.Sprintf(" (nodes counted per %s)", names[f.LeafLevels-1])
		}
	}
	lines := []string{head}
	if f.Ready != nil && f.Ready.Status != metav1.ConditionTrue {
		lines = append(lines, wrap(fmt.Sprintf("  Not ready (%s): ", f.Ready.Reason), "    ", f.Ready.Message)...)
	}
	if f.Coarsened {
		lines = append(lines, "  Coarsened: amounts rounded down to fit the summary's size budget")
	}
	if len(f.Understated) > 0 {
		parts := make([]string, 0, len(f.Understated))
		for _, u := range f.Understated {
			parts = append(parts, fmt.Sprintf("%s %s", u.Name, u.Amount.String()))
		}
		lines = append(lines, wrap("  Understated by: ", "    ", strings.Join(parts, ", "))...)
	}
	if len(f.Taints) > 0 {
		lines = append(lines, wrap("  Tainted nodes (only pods that tolerate the taints use them): ", "    ", strings.Join(f.Taints, "; "))...)
	}
	if f.Problem != "" {
		lines = append(lines, wrap("  No domains: ", "    ", f.Problem)...)
	}
	return lines
}

// writeDomain prints d and its children, indented two spaces per level:
// name, a bar and the free of total amount of res, pods, nodes.
func writeDomain(w io.Writer, d *DomainView, res corev1.ResourceName, depth int) {
	free, capacity := d.Free[res], d.Capacity[res]
	fmt.Fprintf(w, "%s%s\t%s\t%s/%s %s free", strings.Repeat("  ", depth), d.Name,
		bar(free.MilliValue(), capacity.MilliValue()), amount(free.MilliValue()), amount(capacity.MilliValue()), res)
	if res != tas.PodsResource {
		free, capacity := d.Free[tas.PodsResource], d.Capacity[tas.PodsResource]
		fmt.Fprintf(w, "\tpods %s/%s", amount(free.MilliValue()), amount(capacity.MilliValue()))
	}
	nodes := fmt.Sprintf("%d nodes", d.Nodes)
	if d.Nodes == 1 {
		nodes = "1 node"
	}
	var notes []string
	if down := d.Nodes - d.SchedulableNodes; down > 0 {
		notes = append(notes, fmt.Sprintf("%d unschedulable", down))
	}
	if d.TaintedNodes > 0 {
		notes = append(notes, fmt.Sprintf("%d tainted", d.TaintedNodes))
	}
	if d.InFlight != nil {
		if d.InFlight.Pods == 1 {
			notes = append(notes, "1 pod in flight")
		} else {
			notes = append(notes, fmt.Sprintf("%d pods in flight", d.InFlight.Pods))
		}
	}
	if len(notes) > 0 {
		nodes += " (" + strings.Join(notes, ", ") + ")"
	}
	fmt.Fprintf(w, "\t%s\n", nodes)
	for _, c := range d.Children {
		writeDomain(w, c, res, depth+1)
	}
}
