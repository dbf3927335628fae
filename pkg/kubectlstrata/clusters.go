package kubectlstrata

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "strata.dev/strata/api/v1beta1"
)

// ClustersView is what 'kubectl strata clusters' shows: a hub's worker
// clusters and where the hub's Workloads stand.
type ClustersView struct {
	// Clusters are the WorkerClusters by name, then the clusters that hub
	// Workloads are recorded on but that have no WorkerCluster.
	Clusters []ClusterView `json:"clusters"`
	// NotDispatched are the hub Workloads, not finished, on no worker.
	NotDispatched NotDispatchedView `json:"notDispatched"`
}

// ClusterView is one worker cluster as the hub sees it.
type ClusterView struct {
	Name string `json:"name"`
	// Registered is false for a cluster that Workloads are recorded on
	// but that has no WorkerCluster (any more).
	Registered bool `json:"registered"`
	// Connected and SummariesFresh are the WorkerCluster's conditions;
	// Unknown when it has none yet.
	Connected      ConditionView `json:"connected"`
	SummariesFresh ConditionView `json:"summariesFresh"`
	// Dispatching is set when the worker refused the hub's last copy for a
	// reason of its own, or was admitting again since.
	Dispatching *ConditionView `json:"dispatching,omitempty"`
	// Fencing is the WorkerCluster's Fenced condition: whether the hub
	// renews its fencing Lease there (absent with fencing disabled).
	Fencing *ConditionView `json:"fencing,omitempty"`
	// Cordoned is spec.unschedulable: no new dispatches.
	Cordoned bool `json:"cordoned"`
	// Copies is status.workloads: the live copies the hub has there.
	Copies int32 `json:"copies"`
	// Admitted and Waiting count the hub Workloads, not finished,
	// dispatched there: admitted by the worker, or not yet.
	Admitted int32 `json:"admitted"`
	Waiting  int32 `json:"waiting"`
	// Summaries are the worker's capacity summaries the hub last read.
	Summaries []SummaryStatusView `json:"summaries,omitempty"`
}

// SummaryStatusView is the hub's record of one of a worker's summaries:
// which one, and the free capacity it tells, in all and in the freest
// domain of each level.
type SummaryStatusView struct {
	Flavor       string              `json:"flavor"`
	Generation   int64               `json:"generation"`
	ObservedTime *metav1.Time        `json:"observedTime,omitempty"`
	Free         corev1.ResourceList `json:"free,omitempty"`
	// Capacity is what Free is out of: all of the flavor's nodes.
	Capacity    corev1.ResourceList `json:"capacity,omitempty"`
	LargestFree []strata.DomainFree `json:"largestFree,omitempty"`
}

// NotDispatchedView counts the hub Workloads that wait on the hub.
type NotDispatchedView struct {
	Total int32 `json:"total"`
	// ByReason counts them by the reason of their Admitted condition
	// (Pending, NoClusterFits, Suspended, ...), "Invalid" for the
	// invalid ones and "New" for those not looked at yet.
	ByReason map[string]int32 `json:"byReason,omitempty"`
}

// Reasons of NotDispatchedView.ByReason besides the Admitted condition's.
const (
	reasonInvalid = "Invalid"
	reasonNew     = "New"
)

func newClustersCommand() *cobra.Command {
	var f liveFlags
	cmd := &cobra.Command{
		Use:   "clusters [--kubeconfig HUB] [--context CTX] [-o table|json|yaml]",
		Short: "On a hub: the worker clusters, their connection and summaries, and where the hub's workloads are",
		Long: `clusters reads a Strata hub: one row per WorkerCluster with its Connected
and SummariesFresh conditions (the reason when not True), whether it is
cordoned, the live copies the hub has there, the hub Workloads dispatched
there (admitted by the worker, or waiting for it) and the flavors it
publishes summaries of, with each summary's age. Problems follow the table
with their messages; the last line counts the hub Workloads not
dispatched, by reason.

The hub keeps no copy of the summaries' domains: for a worker's free
capacity, run 'kubectl strata topology --cluster NAME' on the hub, or
'kubectl strata topology' with the worker's kubeconfig.`,
		Example: `  kubectl strata clusters
  kubectl strata clusters --context hub -o yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := f.connect()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var wcs strata.WorkerClusterList
			if err := s.client.List(ctx, &wcs); err != nil {
				return apiError(err, "WorkerCluster", "workerclusters", s.where)
			}
			var wls strata.WorkloadList
			if err := s.client.List(ctx, &wls); err != nil {
				return apiError(err, "Workload", "workloads", s.where)
			}
			v := newClustersView(wcs.Items, wls.Items)
			if f.output != "table" {
				return writeStructured(cmd.OutOrStdout(), v, f.output)
			}
			return writeClustersTable(cmd.OutOrStdout(), v, time.Now())
		},
	}
	f.add(cmd, false)
	return cmd
}

// newClustersView builds the view from a hub's WorkerClusters and
// Workloads (all namespaces).
func newClustersView(wcs []strata.WorkerCluster, wls []strata.Workload) ClustersView {
	v := ClustersView{Clusters: []ClusterView{}}
	type counts struct{ admitted, waiting int32 }
	dispatched := map[string]*counts{}
	for i := range wls {
		wl := &wls[i]
		if meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished) {
			continue
		}
		if wl.Status.Placement == nil || wl.Status.Placement.Cluster == "" {
			v.NotDispatched.add(notDispatchedReason(wl))
			continue
		}
		n := dispatched[wl.Status.Placement.Cluster]
		if n == nil {
			n = &counts{}
			dispatched[wl.Status.Placement.Cluster] = n
		}
		if meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadAdmitted) {
			n.admitted++
		} else {
			n.waiting++
		}
	}
	wcs = slices.Clone(wcs)
	slices.SortFunc(wcs, func(a, b strata.WorkerCluster) int { return strings.Compare(a.Name, b.Name) })
	for _, wc := range wcs {
		c := ClusterView{
			Name:           wc.Name,
			Registered:     true,
			Connected:      orUnknown(conditionOf(wc.Status.Conditions, strata.WorkerClusterConnected)),
			SummariesFresh: orUnknown(conditionOf(wc.Status.Conditions, strata.WorkerClusterSummariesFresh)),
			Dispatching:    conditionOf(wc.Status.Conditions, strata.WorkerClusterDispatching),
			Fencing:        conditionOf(wc.Status.Conditions, strata.WorkerClusterFenced),
			Cordoned:       wc.Spec.Unschedulable,
			Copies:         wc.Status.Workloads,
		}
		for _, s := range wc.Status.Summaries {
			c.Summaries = append(c.Summaries, SummaryStatusView{Flavor: s.Flavor, Generation: s.SummaryGeneration, ObservedTime: s.ObservedTime.DeepCopy(),
				Free: s.Free.DeepCopy(), Capacity: s.Capacity.DeepCopy(), LargestFree: slices.Clone(s.LargestFree)})
		}
		slices.SortFunc(c.Summaries, func(a, b SummaryStatusView) int { return strings.Compare(a.Flavor, b.Flavor) })
		if n := dispatched[wc.Name]; n != nil {
			c.Admitted, c.Waiting = n.admitted, n.waiting
			delete(dispatched, wc.Name)
		}
		v.Clusters = append(v.Clusters, c)
	}
	unknown := ConditionView{Status: metav1.ConditionUnknown}
	for _, name := range slices.Sorted(maps.Keys(dispatched)) {
		n := dispatched[name]
		v.Clusters = append(v.Clusters, ClusterView{Name: name, Connected: unknown, SummariesFresh: unknown, Admitted: n.admitted, Waiting: n.waiting})
	}
	return v
}

func orUnknown(c *ConditionView) ConditionView {
	if c == nil {
		return ConditionView{Status: metav1.ConditionUnknown}
	}
	return *c
}

// notDispatchedReason is why a hub Workload waits on the hub.
func notDispatchedReason(wl *strata.Workload) string {
	if meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadInvalid) {
		return reasonInvalid
	}
	if c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted); c != nil && c.Reason != "" {
		return c.Reason
	}
	return reasonNew
}

func (n *NotDispatchedView) add(reason string) {
	if n.ByReason == nil {
		n.ByReason = map[string]int32{}
	}
	n.Total++
	n.ByReason[reason]++
}

// writeClustersTable prints the view as a table, the problems the
// conditions report, and a last line on the Workloads not dispatched.
func writeClustersTable(w io.Writer, v ClustersView, now time.Time) error {
	if len(v.Clusters) == 0 {
		if _, err := fmt.Fprintln(w, "No WorkerClusters on this hub: register the workers (see docs/hub.md)."); err != nil {
			return err
		}
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tCONNECTED\tFRESH\tCORDONED\tCOPIES\tADMITTED\tWAITING\tFLAVORS (SUMMARY AGE)")
		for _, c := range v.Clusters {
			connected, fresh := statusText(&c.Connected), statusText(&c.SummariesFresh)
			if !c.Registered {
				connected, fresh = "no WorkerCluster", "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%t\t%d\t%d\t%d\t%s\n", c.Name, connected, fresh, c.Cordoned, c.Copies, c.Admitted, c.Waiting, summaryAges(c.Summaries, now))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if free := freeLines(v.Clusters); len(free) > 0 {
			if err := writeLines(w, append([]string{"", "Free capacity (from the summaries the hub last read):"}, free...)...); err != nil {
				return err
			}
		}
		if notes := clusterNotes(v.Clusters); len(notes) > 0 {
			if err := writeLines(w, append([]string{""}, notes...)...); err != nil {
				return err
			}
		}
	}
	_, err := fmt.Fprintln(w, notDispatchedLine(v.NotDispatched))
	return err
}

// freeLines are "  w1/gpu: 120 nvidia.com/gpu free; freest block b1 64,
// rack b1/r2 16": each flavor of each worker with its free capacity of its
// main resource, in all and in the freest domain of each level.
func freeLines(cs []ClusterView) []string {
	var out []string
	for _, c := range cs {
		for _, s := range c.Summaries {
			if len(s.LargestFree) == 0 {
				continue
			}
			main := s.LargestFree[0].Resource
			total := s.Free[main]
			parts := make([]string, 0, len(s.LargestFree))
			for _, l := range s.LargestFree {
				parts = append(parts, fmt.Sprintf("%s %s %s", levelName(l.Level), l.Domain, l.Free.String()))
			}
			of := ""
			if c, ok := s.Capacity[main]; ok {
				of = " of " + c.String()
			}
			out = append(out, fmt.Sprintf("  %s/%s: %s%s %s free; freest %s", c.Name, s.Flavor, total.String(), of, main, strings.Join(parts, ", ")))
		}
	}
	return out
}

// levelName is the short name of a level's label key: "rack" for
// cloud.provider.com/topology-rack.
func levelName(label string) string {
	name := label[strings.LastIndex(label, "/")+1:]
	return strings.TrimPrefix(name, "topology-")
}

// summaryAges is "cpu 40s, gpu 2m": each flavor and its summary's age.
func summaryAges(ss []SummaryStatusView, now time.Time) string {
	if len(ss) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(ss))
	for _, s := range ss {
		parts = append(parts, s.Flavor+" "+age(s.ObservedTime, now))
	}
	return strings.Join(parts, ", ")
}

// clusterNotes are the messages of the conditions that are not True:
// Connected, SummariesFresh while connected, and Dispatching.
func clusterNotes(cs []ClusterView) []string {
	var notes []string
	note := func(name, t string, c *ConditionView) {
		if c == nil || c.Status == metav1.ConditionTrue || c.Message == "" {
			return
		}
		notes = append(notes, wrap(fmt.Sprintf("%s %s: ", name, t), "    ", c.Message)...)
	}
	for _, c := range cs {
		if !c.Registered {
			notes = append(notes, fmt.Sprintf("%s: hub Workloads are recorded on it, but it has no WorkerCluster", c.Name))
			continue
		}
		note(c.Name, strata.WorkerClusterConnected, &c.Connected)
		if c.Connected.Status == metav1.ConditionTrue {
			note(c.Name, strata.WorkerClusterSummariesFresh, &c.SummariesFresh)
		}
		note(c.Name, strata.WorkerClusterDispatching, c.Dispatching)
	}
	return notes
}

// notDispatchedLine is "Not dispatched: 3 hub Workloads (NoClusterFits 1,
// Pending 2)".
func notDispatchedLine(n NotDispatchedView) string {
	if n.Total == 0 {
		return "Not dispatched: none"
	}
	reasons := make([]string, 0, len(n.ByReason))
	for r, k := range n.ByReason {
		reasons = append(reasons, fmt.Sprintf("%s %d", r, k))
	}
	slices.Sort(reasons)
	noun := "Workloads"
	if n.Total == 1 {
		noun = "Workload"
	}
	return fmt.Sprintf("Not dispatched: %d hub %s (%s)", n.Total, noun, strings.Join(reasons, ", "))
}
