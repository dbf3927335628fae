package kubectlstrata

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/config"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/workload"
)

// QueueView is the pending workloads of a ClusterQueue, or of one of its
// LocalQueues, in admission order, as Kueue's visibility API lists them.
type QueueView struct {
	Role         string `json:"role"`
	ClusterQueue string `json:"clusterQueue"`
	// LocalQueue is set when the view is of one LocalQueue
	// (namespace/name); Pending then lists its workloads only, with their
	// positions in both queues.
	LocalQueue string `json:"localQueue,omitempty"`
	// ByLocalQueueUsage: the ClusterQueue orders its workloads by their
	// LocalQueues' consumed usage first (admission fair sharing), as the
	// LocalQueues' status shows it, each resource weighed as
	// ResourceWeights says.
	ByLocalQueueUsage bool `json:"byLocalQueueUsage,omitempty"`
	// ResourceWeights are the weights of resources in the usages'
	// comparison, from the agent's (or hub's) configuration; a resource
	// not listed weighs 1. WeightsFrom says where they were read, or why
	// they could not be (each resource then weighs 1).
	ResourceWeights map[corev1.ResourceName]float64 `json:"resourceWeights,omitempty"`
	WeightsFrom     string                          `json:"resourceWeightsFrom,omitempty"`
	Pending         []PendingView                   `json:"pending"`
}

// fairSharing is the admission fair sharing configuration of the agent or
// hub serving the queues, as far as kubectl strata can read it.
type fairSharing struct {
	// cfg is the configuration's admissionFairSharing (nil: off) when
	// known.
	cfg *configv1beta1.AdmissionFairSharing
	// known: the configuration was read, from; otherwise from says why
	// not, and the LocalQueues' status alone says whether the queues are
	// ordered by usage.
	known bool
	from  string
}

// PendingView is one pending workload.
type PendingView struct {
	// Position is its place in its ClusterQueue's order (1 is next),
	// LocalQueuePosition among the workloads of its LocalQueue.
	Position           int          `json:"positionInClusterQueue"`
	LocalQueuePosition int          `json:"positionInLocalQueue"`
	Namespace          string       `json:"namespace"`
	Name               string       `json:"name"`
	LocalQueue         string       `json:"localQueue"`
	Priority           int32        `json:"priority"`
	Created            *metav1.Time `json:"created,omitempty"`
	// Reason and Message are those of its Admitted condition: why it
	// waits.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// pendingHere says whether a Workload waits in its queue: on a worker,
// not admitted; on a hub, not dispatched. Finished, invalid and
// deactivated ones (spec.active false: the agent and the hub serve none)
// do not.
func pendingHere(wl *strata.Workload, hub bool) bool {
	if meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished) ||
		meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadInvalid) || !wl.DeletionTimestamp.IsZero() || !workload.IsActive(wl) {
		return false
	}
	if hub {
		return wl.Status.Placement == nil || wl.Status.Placement.Cluster == ""
	}
	return wl.Status.Admission == nil
}

// newQueueView orders the pending Workloads of the LocalQueues that point
// at ClusterQueue cq (lqs: namespace/name → the LocalQueue) as the
// scheduler serves them: priority, then queue time, then name; under
// admission fair sharing (on in fs when known, cqObj's admissionScope,
// and a LocalQueue of it with a consumed usage in its status: the agent
// or hub keeps it), their LocalQueue's usage first, weighed by fs's
// resource weights. When onlyLocal is set, only that LocalQueue's
// workloads are listed.
func newQueueView(cq string, cqObj *strata.ClusterQueue, lqs map[types.NamespacedName]*strata.LocalQueue, wls []strata.Workload, hub bool, onlyLocal *types.NamespacedName, fs fairSharing) QueueView {
	v := QueueView{Role: roleWorker, ClusterQueue: cq, Pending: []PendingView{}}
	if hub {
		v.Role = roleHub
	}
	if onlyLocal != nil {
		v.LocalQueue = onlyLocal.String()
	}
	var pending []*strata.Workload
	for i := range wls {
		wl := &wls[i]
		if lq := lqs[queue.Key(wl)]; lq != nil && lq.Spec.ClusterQueue == cq && pendingHere(wl, hub) {
			pending = append(pending, wl)
		}
	}
	// Unknown configuration: on, each resource weighing 1, where the
	// LocalQueues' status shows the usage the agent or hub keeps.
	afsCfg := &configv1beta1.AdmissionFairSharing{}
	if fs.known {
		afsCfg = fs.cfg
	}
	afs := queue.NewAdmissionFairSharing(afsCfg)
	for _, lq := range lqs {
		if afs.Orders(cqObj) && lq.Spec.ClusterQueue == cq && lq.Status.FairSharing != nil && lq.Status.FairSharing.AdmissionFairSharingStatus != nil {
			v.ByLocalQueueUsage = true
		}
	}
	if v.ByLocalQueueUsage {
		v.ResourceWeights, v.WeightsFrom = afs.Weights, fs.from
		slices.SortStableFunc(pending, afs.NewPass(func(key types.NamespacedName) *strata.LocalQueue { return lqs[key] }, queue.Penalties{}).Compare)
	} else {
		slices.SortStableFunc(pending, queue.Compare)
	}
	perLocal := map[types.NamespacedName]int{}
	for i, wl := range pending {
		lq := queue.Key(wl)
		perLocal[lq]++
		if onlyLocal != nil && lq != *onlyLocal {
			continue
		}
		p := PendingView{Position: i + 1, LocalQueuePosition: perLocal[lq], Namespace: wl.Namespace, Name: wl.Name,
			LocalQueue: wl.Spec.QueueName, Priority: queue.Priority(wl)}
		if !wl.CreationTimestamp.IsZero() {
			p.Created = wl.CreationTimestamp.DeepCopy()
		}
		if c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted); c != nil && c.Status != metav1.ConditionTrue {
			p.Reason, p.Message = c.Reason, c.Message
		}
		v.Pending = append(v.Pending, p)
	}
	return v
}

// positionOf returns a Workload's position in its ClusterQueue and the
// number of pending workloads there, 0 when it is not pending.
func positionOf(v QueueView, wl *strata.Workload) (int, int) {
	for _, p := range v.Pending {
		if p.Namespace == wl.Namespace && p.Name == wl.Name {
			return p.Position, len(v.Pending)
		}
	}
	return 0, len(v.Pending)
}

// maxReasonWidth bounds the REASON column of the queue table.
const maxReasonWidth = 80

func writeQueueTable(w io.Writer, v QueueView, now time.Time) error {
	head := fmt.Sprintf("ClusterQueue %s (on the %s): %d pending", v.ClusterQueue, v.Role, len(v.Pending))
	if v.LocalQueue != "" {
		head = fmt.Sprintf("LocalQueue %s of ClusterQueue %s (on the %s): %d pending", v.LocalQueue, v.ClusterQueue, v.Role, len(v.Pending))
	}
	if v.ByLocalQueueUsage {
		head += "; by LocalQueue usage first (admission fair sharing"
		var ws []string
		for r, w := range v.ResourceWeights {
			ws = append(ws, fmt.Sprintf("%s=%g", r, w))
		}
		slices.Sort(ws)
		switch {
		case len(ws) > 0:
			head += "; resource weights " + strings.Join(ws, ",") + ", others 1"
		default:
			head += "; each resource weighing 1"
		}
		if v.WeightsFrom != "" {
			head += ": " + v.WeightsFrom
		}
		head += ")"
	}
	if _, err := fmt.Fprintln(w, head); err != nil {
		return err
	}
	if len(v.Pending) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POSITION\tIN LOCALQUEUE\tNAMESPACE\tWORKLOAD\tLOCALQUEUE\tPRIORITY\tAGE\tREASON")
	for _, p := range v.Pending {
		reason := p.Reason
		if p.Message != "" {
			reason += ": " + p.Message
		}
		if len(reason) > maxReasonWidth {
			reason = reason[:maxReasonWidth-3] + "..."
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%d\t%s\t%s\n", p.Position, p.LocalQueuePosition, p.Namespace, p.Name, p.LocalQueue, p.Priority,
			age(p.Created, now), orDash(reason))
	}
	return tw.Flush()
}

func newQueueCommand() *cobra.Command {
	var f liveFlags
	var configFile string
	cmd := &cobra.Command{
		Use:   "queue (LOCALQUEUE [-n NAMESPACE] | cq/CLUSTERQUEUE) [--kubeconfig FILE] [--context CTX] [-o table|json|yaml]",
		Short: "The pending workloads of a LocalQueue or ClusterQueue in admission order, with their positions and why they wait",
		Long: `queue lists the workloads waiting in a ClusterQueue (cq/NAME), or in one
of its LocalQueues (NAME, in -n's namespace), in the order the agent or the
hub serves them: higher priority first, then older first (under admission
fair sharing, the LocalQueue that consumed less first, its resources
weighed as the agent's or hub's configuration says: read from the chart's
ConfigMap, <chart>-config, labelled app.kubernetes.io/name=<chart>, or
from --config; when you may not read it, each resource weighs 1 and the
header says why).
Each has its
position in the ClusterQueue and in its LocalQueue (Kueue's
positionInClusterQueue and positionInLocalQueue) and its Admitted
condition's reason. On a worker a workload waits until the agent admits it;
on a hub, until the hub dispatches it.`,
		Example: `  kubectl strata queue team-a -n ml
  kubectl strata queue cq/training --context hub -o yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := f.connect()
			if err != nil {
				return err
			}
			if configFile != "" {
				data, err := os.ReadFile(configFile)
				if err != nil {
					return fmt.Errorf("reading --config: %w", err)
				}
				s.config = data
				s.configFrom = configFile
			}
			v, err := queueView(cmd.Context(), s, args[0])
			if err != nil {
				return err
			}
			if f.output != "table" {
				return writeStructured(cmd.OutOrStdout(), v, f.output)
			}
			return writeQueueTable(cmd.OutOrStdout(), v, time.Now())
		},
	}
	f.add(cmd, true)
	cmd.Flags().StringVar(&configFile, "config", "", "the agent's (on a hub, the hub's) configuration file, for admission fair sharing's resource weights (default: read from the chart's ConfigMap)")
	return cmd
}

// queueView reads what the view of arg (LOCALQUEUE or cq/CLUSTERQUEUE)
// needs: the LocalQueues, the Workloads and the cluster's role.
func queueView(ctx context.Context, s *session, arg string) (QueueView, error) {
	var cq string
	var only *types.NamespacedName
	if name, ok := strings.CutPrefix(arg, "cq/"); ok {
		cq = name
		var c strata.ClusterQueue
		if err := s.client.Get(ctx, types.NamespacedName{Name: name}, &c); err != nil {
			if client.IgnoreNotFound(err) == nil {
				return QueueView{}, fmt.Errorf("ClusterQueue %s not found on %s", name, s.where)
			}
			return QueueView{}, apiError(err, "ClusterQueue", "clusterqueues", s.where)
		}
	} else {
		var lq strata.LocalQueue
		key := types.NamespacedName{Namespace: s.namespace, Name: arg}
		if err := s.client.Get(ctx, key, &lq); err != nil {
			if client.IgnoreNotFound(err) == nil {
				return QueueView{}, fmt.Errorf("LocalQueue %s not found on %s (-n picks the namespace; cq/NAME names a ClusterQueue)", key, s.where)
			}
			return QueueView{}, apiError(err, "LocalQueue", "localqueues", s.where)
		}
		cq, only = lq.Spec.ClusterQueue, &key
	}
	return readQueue(ctx, s, cq, only)
}

// readQueue reads the LocalQueues and Workloads of the cluster and builds
// the view of ClusterQueue cq.
func readQueue(ctx context.Context, s *session, cq string, only *types.NamespacedName) (QueueView, error) {
	var lqList strata.LocalQueueList
	if err := s.client.List(ctx, &lqList); err != nil {
		return QueueView{}, apiError(err, "LocalQueue", "localqueues", s.where)
	}
	lqs := map[types.NamespacedName]*strata.LocalQueue{}
	for i := range lqList.Items {
		lq := &lqList.Items[i]
		lqs[types.NamespacedName{Namespace: lq.Namespace, Name: lq.Name}] = lq
	}
	var cqObj *strata.ClusterQueue
	var c strata.ClusterQueue
	if err := s.client.Get(ctx, types.NamespacedName{Name: cq}, &c); err == nil {
		cqObj = &c
	} else if client.IgnoreNotFound(err) != nil {
		return QueueView{}, apiError(err, "ClusterQueue", "clusterqueues", s.where)
	}
	var wls strata.WorkloadList
	if err := s.client.List(ctx, &wls); err != nil {
		return QueueView{}, apiError(err, "Workload", "workloads", s.where)
	}
	hub, err := s.isHub()
	if err != nil {
		return QueueView{}, apiError(err, "WorkerCluster", "workerclusters", s.where)
	}
	var fs fairSharing
	if cqObj != nil && cqObj.Spec.AdmissionScope != nil && cqObj.Spec.AdmissionScope.AdmissionMode == strata.UsageBasedAdmissionFairSharing {
		fs = readFairSharing(ctx, s, hub)
	}
	return newQueueView(cq, cqObj, lqs, wls.Items, hub, only, fs), nil
}

// chartNamespace is where the charts' install commands put a release.
const chartNamespace = "strata-system"

// readFairSharing reads the admission fair sharing configuration of the
// agent (or, on a hub, the hub) from its chart's ConfigMap: the one named
// <chart>-config among those labelled app.kubernetes.io/name=<chart> in
// the namespaces the user may list, else strata-system's. What cannot be
// read (no such ConfigMap, no permission, an invalid configuration) is
// said in the result, not an error: the queue is then listed with each
// resource weighing 1.
func readFairSharing(ctx context.Context, s *session, hub bool) fairSharing {
	chart := "strata-agent"
	if hub {
		chart = "strata-hub"
	}
	if s.config != nil {
		return parseFairSharing(s.config, s.configFrom, hub)
	}
	name := chart + "-config"
	var cm *corev1.ConfigMap
	var list corev1.ConfigMapList
	err := s.client.List(ctx, &list, client.MatchingLabels{"app.kubernetes.io/name": chart})
	if err == nil {
		for i := range list.Items {
			if c := &list.Items[i]; c.Name == name && (cm == nil || c.Namespace == chartNamespace) {
				cm = c
			}
		}
		if cm == nil {
			return fairSharing{from: fmt.Sprintf("no ConfigMap %s labelled app.kubernetes.io/name=%s on %s", name, chart, s.where)}
		}
	} else {
		var c corev1.ConfigMap
		if err := s.client.Get(ctx, types.NamespacedName{Namespace: chartNamespace, Name: name}, &c); err != nil {
			return fairSharing{from: fmt.Sprintf("the %s configuration is not readable (ConfigMap %s/%s: %v)", chart, chartNamespace, name, err)}
		}
		cm = &c
	}
	source := fmt.Sprintf("ConfigMap %s/%s", cm.Namespace, name)
	data, ok := cm.Data["config.yaml"]
	if !ok {
		return fairSharing{from: source + " has no config.yaml"}
	}
	return parseFairSharing([]byte(data), source, hub)
}

// parseFairSharing reads the admission fair sharing of an agent's (hub:
// a hub's) configuration read from source.
func parseFairSharing(data []byte, source string, hub bool) fairSharing {
	var afs *configv1beta1.AdmissionFairSharing
	if hub {
		cfg, err := config.ParseHub(data, source)
		if err != nil {
			return fairSharing{from: err.Error()}
		}
		afs = cfg.AdmissionFairSharing
	} else {
		cfg, err := config.ParseAgent(data, source)
		if err != nil {
			return fairSharing{from: err.Error()}
		}
		afs = cfg.AdmissionFairSharing
	}
	return fairSharing{cfg: afs, known: true, from: source}
}
