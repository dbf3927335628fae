package kubectlstrata

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	pkgjobs "strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/jobs/batchjob"
	"strata.dev/strata/pkg/jobs/kinds"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

// ExplainView is what 'kubectl strata explain' shows: where a Job's
// Workload stands and why.
type ExplainView struct {
	// Role is "hub" on a cluster that serves WorkerClusters, else "worker".
	Role     string    `json:"role"`
	Job      ObjectRef `json:"job"`
	Workload string    `json:"workload"`
	Queue    string    `json:"queue"`
	// Priority is the Workload's priority and the class it came from.
	Priority *PriorityView `json:"priority,omitempty"`
	// Position is, while it waits, its place in its ClusterQueue's order.
	Position *PositionView `json:"position,omitempty"`
	// Deleting says, of a hub Workload deleted while its job exists, what
	// it waits for before it goes (strata.dev/copy-gone).
	Deleting string `json:"deleting,omitempty"`
	// Admitted, Invalid, Evicted, Preempted, CopyGoing and Finished are
	// the Workload's conditions of those types, when it has them. A
	// preemptor's Admitted message says whom it preempts and waits for,
	// or why no preemption helps it; a hub Workload's CopyGoing, which
	// pods on its worker a take-back waits for.
	Admitted  *ConditionView `json:"admitted,omitempty"`
	Invalid   *ConditionView `json:"invalid,omitempty"`
	Evicted   *ConditionView `json:"evicted,omitempty"`
	Preempted *ConditionView `json:"preempted,omitempty"`
	CopyGoing *ConditionView `json:"copyGoing,omitempty"`
	Finished  *ConditionView `json:"finished,omitempty"`
	// Unreachable is a hub Workload's WorkerUnreachable condition: its
	// worker does not answer, and when the hub places it elsewhere.
	Unreachable *ConditionView `json:"unreachable,omitempty"`
	// PodsReady is, on a worker, whether the pods of its admission are
	// all ready (waitForPodsReady); RequeueState its evictions for pods
	// not ready in time and when it queues again.
	PodsReady    *ConditionView       `json:"podsReady,omitempty"`
	RequeueState *strata.RequeueState `json:"requeueState,omitempty"`
	// Resized is an elastic Job's Resized condition: its admission
	// follows its new size in place, or why that waits.
	Resized *ConditionView `json:"resized,omitempty"`
	// QuotaReserved is, where its queue (a worker's, or the hub's)
	// names AdmissionChecks, whether its quota is reserved; Checks the
	// checks' states.
	QuotaReserved *ConditionView `json:"quotaReserved,omitempty"`
	Checks        []CheckView    `json:"admissionChecks,omitempty"`
	// TimeLimit is its maximum execution time (max-exec-time-seconds)
	// and what its admissions used of it.
	TimeLimit *TimeLimitView `json:"timeLimit,omitempty"`
	// Dispatch is set on a worker for a hub's copy: the hub dispatch it
	// belongs to.
	Dispatch *DispatchView `json:"dispatch,omitempty"`
	// Placement is the hub's record of where it sent the Workload.
	Placement *PlacementView `json:"placement,omitempty"`
	// Admission is the admission by the worker's agent (on a hub, the one
	// the hub mirrored from the worker).
	Admission *AdmissionView `json:"admission,omitempty"`
	// UnhealthyNodes are failed nodes running its pods, being replaced.
	UnhealthyNodes []string `json:"unhealthyNodes,omitempty"`
}

// TimeLimitView is a Workload's maximum execution time: the seconds it
// may be admitted in all, those its earlier admissions used, and since
// when its current admission runs (unset while it has none).
type TimeLimitView struct {
	Seconds            int32        `json:"seconds"`
	AccumulatedSeconds int32        `json:"accumulatedSeconds,omitempty"`
	AdmittedSince      *metav1.Time `json:"admittedSince,omitempty"`
}

// line says how much of the limit is used and left at now.
func (t *TimeLimitView) line(now time.Time) string {
	used := time.Duration(t.AccumulatedSeconds) * time.Second
	if t.AdmittedSince != nil {
		used += max(now.Sub(t.AdmittedSince.Time), 0)
	}
	used = used.Truncate(time.Second)
	limit := time.Duration(t.Seconds) * time.Second
	left := max(limit-used, 0)
	switch {
	case t.AdmittedSince != nil:
		return fmt.Sprintf("Time limit: %s admitted in all (max-exec-time-seconds): %s used, %s left", limit, used, left)
	case used > 0:
		return fmt.Sprintf("Time limit: %s admitted in all (max-exec-time-seconds): %s used by earlier admissions, %s left", limit, used, left)
	}
	return fmt.Sprintf("Time limit: %s admitted in all (max-exec-time-seconds)", limit)
}

// CheckView is one AdmissionCheck's state for the Workload.
type CheckView struct {
	Name               string       `json:"name"`
	State              string       `json:"state"`
	Message            string       `json:"message,omitempty"`
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`
}

// PriorityView is a Workload's priority: its value, and the
// WorkloadPriorityClass or PriorityClass it was taken from.
type PriorityView struct {
	Value  int32  `json:"value"`
	Class  string `json:"class,omitempty"`
	Source string `json:"source,omitempty"`
}

// PositionView is a waiting Workload's place in its ClusterQueue: 1 is
// served next.
type PositionView struct {
	ClusterQueue string `json:"clusterQueue"`
	Position     int    `json:"position"`
	Of           int    `json:"of"`
}

// ObjectRef names a namespaced object; Kind is set for kinds other than
// batch/v1 Job.
type ObjectRef struct {
	Kind      string `json:"kind,omitempty"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// DispatchView is the dispatch contract a hub's copy carries.
type DispatchView struct {
	Origin         string `json:"origin,omitempty"`
	HubWorkloadUID string `json:"hubWorkloadUID,omitempty"`
	Generation     string `json:"generation,omitempty"`
	// Flavor is the flavor the hub pinned.
	Flavor string `json:"flavor,omitempty"`
	// PodSetFlavors are the flavors the hub pinned its pod sets to, as
	// "name=flavor,..." (strata.dev/pod-set-flavors).
	PodSetFlavors string `json:"podSetFlavors,omitempty"`
}

// PlacementView is a hub Workload's status.placement.
type PlacementView struct {
	// Cluster holds the live copy; empty while the Workload waits on the
	// hub.
	Cluster            string `json:"cluster,omitempty"`
	Flavor             string `json:"flavor,omitempty"`
	DispatchGeneration int64  `json:"dispatchGeneration"`
	// PreemptUpTo: the copy may preempt workloads of priority ≤ it on
	// Cluster (the hub's fleet preemption).
	PreemptUpTo *int32 `json:"preemptUpTo,omitempty"`
	// PodSetCounts: placed with fewer pods than it asks for (partial
	// admission), as "name=count,...".
	PodSetCounts string `json:"podSetCounts,omitempty"`
	// PodSetFlavors: its pod sets placed on different flavors of Cluster,
	// as "name=flavor,...".
	PodSetFlavors string        `json:"podSetFlavors,omitempty"`
	Attempts      []AttemptView `json:"attempts,omitempty"`
}

// AttemptView is one dispatch and its outcome.
type AttemptView struct {
	Cluster            string      `json:"cluster"`
	Flavor             string      `json:"flavor,omitempty"`
	DispatchGeneration int64       `json:"dispatchGeneration"`
	Result             string      `json:"result"`
	Time               metav1.Time `json:"time"`
	Message            string      `json:"message,omitempty"`
}

// AdmissionView is a Workload's admission, topology assignments decoded.
type AdmissionView struct {
	ClusterQueue string                `json:"clusterQueue"`
	PodSets      []PodSetAdmissionView `json:"podSets"`
}

// PodSetAdmissionView is the admission of one pod set.
type PodSetAdmissionView struct {
	Name   string `json:"name"`
	Flavor string `json:"flavor"`
	Count  int32  `json:"count"`
	// Levels and Domains are the decoded topology assignment: the pods of
	// each domain, in rank order.
	Levels  []string             `json:"levels,omitempty"`
	Domains []AssignedDomainView `json:"domains,omitempty"`
	// Problem is set when the topology assignment does not decode.
	Problem string `json:"problem,omitempty"`
	// DelayedTopologyRequest is the state of a topology assignment a
	// ProvisioningRequest check delays (KEP-2724): Pending until the
	// second pass, then Ready.
	DelayedTopologyRequest string `json:"delayedTopologyRequest,omitempty"`
}

// AssignedDomainView is one domain of a topology assignment.
type AssignedDomainView struct {
	Values []string `json:"values"`
	Pods   int32    `json:"pods"`
}

// Roles of ExplainView.
const (
	roleHub    = "hub"
	roleWorker = "worker"
)

// maxDomainLines is how many domains of a pod set the table lists.
const maxDomainLines = 16

func newExplainCommand() *cobra.Command {
	var f liveFlags
	cmd := &cobra.Command{
		Use:   "explain [" + explainKinds() + "]NAME [-n NAMESPACE] [--kubeconfig FILE] [--context CTX] [-o table|json|yaml]",
		Short: "Why a Job, JobSet, MPIJob or LeaderWorkerSet waits or where it runs: its Workload's queue, conditions, placement and admission",
		Long: `explain finds the Workload of a batch/v1 Job (NAME or job/NAME), a
JobSet (jobset/NAME) or an MPIJob (mpijob/NAME) — or the Workload of every
group of a LeaderWorkerSet (lws/NAME), one after the other — and prints its queue, its
Admitted condition (reason and message: why it waits), and its Invalid
condition when it has one. On a hub it adds the placement record: the
worker and flavor of the current dispatch and the last attempts with their
results and messages. When admitted, on a worker or on the hub after the
worker admitted the copy, it lists the admission: flavor, and the pods per
topology domain. It works on a hub and on a worker.`,
		Example: `  kubectl strata explain train-llm -n ml
  kubectl strata explain jobset/two-level -n ml
  kubectl strata explain mpijob/pi -n ml
  kubectl strata explain lws/tas-example-lws -n ml
  kubectl strata explain train-llm -n ml --context hub -o yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := f.connect()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			kind, name, err := parseJobArg(args[0])
			if err != nil {
				return err
			}
			if grouped, ok := kind.(pkgjobs.GroupedWorkloads); ok {
				return explainGroups(cmd, s, kind, grouped, name, f.output)
			}
			v, err := explainOne(ctx, s, kind, name)
			if err != nil {
				return err
			}
			if f.output != "table" {
				return writeStructured(cmd.OutOrStdout(), v, f.output)
			}
			return writeExplain(cmd.OutOrStdout(), v, time.Now())
		},
	}
	f.add(cmd, true)
	return cmd
}

// explainOne builds the view of the Workload of the job of kind named
// name in the session's namespace.
func explainOne(ctx context.Context, s *session, kind pkgjobs.Kind, name string) (ExplainView, error) {
	obj, err := getJob(ctx, s, kind, name)
	if err != nil {
		return ExplainView{}, err
	}
	job, _ := kind.Adapt(obj)
	if err := checkManaged(job); err != nil {
		return ExplainView{}, err
	}
	var wl strata.Workload
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: kind.WorkloadName(name)}, &wl); err != nil {
		if apierrors.IsNotFound(err) {
			return ExplainView{}, noWorkloadYet(job, nil)
		}
		return ExplainView{}, apiError(err, "Workload", "workloads", s.where)
	}
	if err := noWorkloadYet(job, &wl); err != nil {
		return ExplainView{}, err
	}
	hub, err := s.isHub()
	if err != nil {
		return ExplainView{}, apiError(err, "WorkerCluster", "workerclusters", s.where)
	}
	v := newExplainView(job, &wl, hub)
	if pendingHere(&wl, hub) {
		var lq strata.LocalQueue
		if err := s.client.Get(ctx, queue.Key(&wl), &lq); err == nil {
			if qv, err := readQueue(ctx, s, lq.Spec.ClusterQueue, nil); err == nil {
				if at, of := positionOf(qv, &wl); at > 0 {
					v.Position = &PositionView{ClusterQueue: lq.Spec.ClusterQueue, Position: at, Of: of}
				}
			}
		}
	}
	return v, nil
}

// getJob reads the object of kind named name in the session's namespace.
func getJob(ctx context.Context, s *session, kind pkgjobs.Kind, name string) (client.Object, error) {
	obj := kind.NewObject()
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%s %s/%s not found on %s (-n picks the namespace)", strings.ToLower(kind.GroupVersionKind().Kind), s.namespace, name, s.where)
		}
		return nil, jobReadError(err, kind, s.where)
	}
	return obj, nil
}

// explainGroups explains each group of a job of a GroupedWorkloads kind
// (a LeaderWorkerSet) on a worker, where every group is a Workload of its
// own; on the hub, the job's one Workload.
func explainGroups(cmd *cobra.Command, s *session, kind pkgjobs.Kind, grouped pkgjobs.GroupedWorkloads, name, output string) error {
	ctx := cmd.Context()
	obj, err := getJob(ctx, s, kind, name)
	if err != nil {
		return err
	}
	hub, err := s.isHub()
	if err != nil {
		return apiError(err, "WorkerCluster", "workerclusters", s.where)
	}
	if hub {
		// On the hub the whole job is one Workload.
		v, err := explainOne(ctx, s, kind, name)
		if err != nil {
			return err
		}
		if output != "table" {
			return writeStructured(cmd.OutOrStdout(), v, output)
		}
		return writeExplain(cmd.OutOrStdout(), v, time.Now())
	}
	views := []ExplainView{}
	for g, group := range grouped.WorkerJobs(obj) {
		v, err := explainOne(ctx, s, group.Kind(), name)
		if err != nil {
			return fmt.Errorf("group %d: %w", g, err)
		}
		views = append(views, v)
	}
	if output != "table" {
		return writeStructured(cmd.OutOrStdout(), views, output)
	}
	for i, v := range views {
		if i > 0 {
			fmt.Fprintln(cmd.OutOrStdout())
		}
		if err := writeExplain(cmd.OutOrStdout(), v, time.Now()); err != nil {
			return err
		}
	}
	return nil
}

// parseJobArg reads explain's argument: NAME (a batch/v1 Job) or
// KIND/NAME, KIND one of the names of a registered kind (its short name,
// kind or resource, with or without its group, as kubectl takes them:
// job/NAME, jobsets.jobset.x-k8s.io/NAME, lws/NAME).
func parseJobArg(arg string) (pkgjobs.Kind, string, error) {
	kind, name, found := strings.Cut(arg, "/")
	if !found {
		return batchjob.Kind, arg, nil
	}
	for _, r := range kinds.Registered {
		if slices.Contains(r.Names(), kind) {
			return r.Kind, name, nil
		}
	}
	var takes []string
	for _, r := range kinds.Registered {
		k, form := r.Kind.GroupVersionKind().Kind, r.Names()[0]+"/NAME"
		if r.Kind == batchjob.Kind {
			form = "NAME or " + form
		}
		takes = append(takes, fmt.Sprintf("%s %s (%s)", article(k), k, form))
	}
	return nil, "", fmt.Errorf("explain takes %s or %s, not %q", strings.Join(takes[:len(takes)-1], ", "), takes[len(takes)-1], kind)
}

// explainKinds is "job/|jobset/|...|": the first name of every registered
// kind, as explain's usage shows them.
func explainKinds() string {
	var out strings.Builder
	for _, r := range kinds.Registered {
		out.WriteString(r.Names()[0] + "/|")
	}
	return strings.TrimSuffix(out.String(), "|")
}

// article is the indefinite article of a kind's name: "an" when it is
// said with a vowel first (a vowel, or an initialism's A, E, F, H, I, L,
// M, N, O, R, S or X: "an MPIJob"), else "a".
func article(kind string) string {
	vowels := "AEIOU"
	if len(kind) > 1 && unicode.IsUpper(rune(kind[1])) {
		vowels = "AEFHILMNORSX"
	}
	if kind != "" && strings.ContainsRune(vowels, rune(kind[0])) {
		return "an"
	}
	return "a"
}

// refOf names a job in the view.
func refOf(job pkgjobs.Job) ObjectRef {
	obj := job.Object()
	ref := ObjectRef{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	if _, isJob := job.(batchjob.Job); !isJob {
		ref.Kind = job.Kind().GroupVersionKind().Kind
	}
	return ref
}

// describe is "job ns/name" (or "jobset ns/name") for messages.
func describe(job pkgjobs.Job) string {
	obj := job.Object()
	return fmt.Sprintf("%s %s/%s", strings.ToLower(job.Kind().GroupVersionKind().Kind), obj.GetNamespace(), obj.GetName())
}

// jobReadError says why a job of kind could not be read from where: a
// cluster that does not serve the kind is named as such (its CRD is not
// installed), not taken for one without Strata.
func jobReadError(err error, kind pkgjobs.Kind, where string) error {
	gvk := kind.GroupVersionKind()
	switch {
	case meta.IsNoMatchError(err):
		return fmt.Errorf("%s does not serve %s (%s): its CRD is not installed there, so Strata runs no %ss on it", where, pkgjobs.Resource(kind), gvk.GroupVersion(), gvk.Kind)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("you may not get %s on %s: ask for read access (%w)", pkgjobs.Resource(kind), where, err)
	}
	return apiError(err, gvk.Kind, strings.ToLower(gvk.Kind)+"s", where)
}

// checkManaged rejects a Job Strata does not manage.
func checkManaged(job pkgjobs.Job) error {
	if job.Object().GetLabels()[strata.QueueNameLabel] == "" {
		return fmt.Errorf("%s is not managed by Strata: it has no %s label", describe(job), strata.QueueNameLabel)
	}
	return nil
}

// noWorkloadYet says that the Job has no Workload of its own yet: wl is
// nil when none of its name exists, or belongs to an earlier Job of the
// same name. It returns nil when wl is the Job's.
func noWorkloadYet(job pkgjobs.Job, wl *strata.Workload) error {
	name := job.Kind().WorkloadName(job.Object().GetName())
	if wl == nil {
		return fmt.Errorf("%s has no Workload yet (%s): strata-agent on a worker, or strata-hub on a hub, creates it; is it running?", describe(job), name)
	}
	if owner := metav1.GetControllerOfNoCopy(wl); owner != nil && owner.UID != job.Object().GetUID() {
		if held := copyHeld(wl); held != "" {
			return fmt.Errorf("%s has no Workload yet: %s belongs to an earlier %s of that name, which is being deleted; %s; then this %s gets its own",
				describe(job), name, job.Kind().GroupVersionKind().Kind, held, job.Kind().GroupVersionKind().Kind)
		}
		return fmt.Errorf("%s has no Workload yet: %s belongs to an earlier %s of that name and is being replaced", describe(job), name, job.Kind().GroupVersionKind().Kind)
	}
	return nil
}

// copyHeld says, of a hub Workload being deleted that waits for its copy
// (strata.CopyGoneFinalizer), or of a copy's Workload on a worker being
// deleted that waits for its pods (strata.PodsGoneFinalizer), what it
// waits for; "" when it does not.
func copyHeld(wl *strata.Workload) string {
	if wl.DeletionTimestamp.IsZero() {
		return ""
	}
	if !slices.Contains(wl.Finalizers, strata.CopyGoneFinalizer) {
		if !slices.Contains(wl.Finalizers, strata.PodsGoneFinalizer) {
			return ""
		}
		held := "it goes once its pods are gone (strata-agent removes its " + strata.PodsGoneFinalizer + " finalizer then)"
		if pods := wl.Annotations[strata.GoingPodsAnnotation]; pods != "" {
			held += "; waiting for " + pods
		}
		return held
	}
	held := "it goes once its copy is gone from its worker or known stopped there"
	if p := wl.Status.Placement; p != nil && p.Cluster != "" {
		held = "it goes once its copy on " + p.Cluster + " is gone or known stopped there"
	}
	if c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadWorkerUnreachable); c != nil && c.Status == metav1.ConditionTrue {
		held += " (" + c.Message + ")"
	}
	return held
}

// newExplainView builds the view of a Job's Workload; hub says whether the
// cluster is a hub.
func newExplainView(job pkgjobs.Job, wl *strata.Workload, hub bool) ExplainView {
	v := ExplainView{
		Role:     roleWorker,
		Job:      refOf(job),
		Workload: wl.Name,
		Queue:    wl.Spec.QueueName,
		Admitted: conditionOf(wl.Status.Conditions, strata.WorkloadAdmitted),
		Invalid:  conditionOf(wl.Status.Conditions, strata.WorkloadInvalid),
		Evicted:  conditionOf(wl.Status.Conditions, strata.WorkloadEvicted),
		Finished: conditionOf(wl.Status.Conditions, strata.WorkloadFinished),
	}
	v.Preempted = conditionOf(wl.Status.Conditions, strata.WorkloadPreempted)
	v.CopyGoing = conditionOf(wl.Status.Conditions, strata.WorkloadCopyGoing)
	v.Unreachable = conditionOf(wl.Status.Conditions, strata.WorkloadWorkerUnreachable)
	if wl.Status.Admission != nil {
		v.PodsReady = conditionOf(wl.Status.Conditions, strata.WorkloadPodsReady)
		v.Resized = conditionOf(wl.Status.Conditions, strata.WorkloadResized)
	}
	v.RequeueState = wl.Status.RequeueState
	v.QuotaReserved = conditionOf(wl.Status.Conditions, strata.WorkloadQuotaReserved)
	for _, c := range wl.Status.AdmissionChecks {
		v.Checks = append(v.Checks, CheckView{Name: c.Name, State: string(c.State), Message: c.Message, LastTransitionTime: c.LastTransitionTime.DeepCopy()})
	}
	if m := wl.Spec.MaximumExecutionTimeSeconds; m != nil {
		v.TimeLimit = &TimeLimitView{Seconds: *m, AccumulatedSeconds: ptr.Deref(wl.Status.AccumulatedPastExecutionTimeSeconds, 0)}
		if c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted); wl.Status.Admission != nil && c != nil && c.Status == metav1.ConditionTrue {
			v.TimeLimit.AdmittedSince = c.LastTransitionTime.DeepCopy()
		}
	}
	v.Deleting = copyHeld(wl)
	if wl.Spec.Priority != nil || wl.Spec.PriorityClassName != "" {
		v.Priority = &PriorityView{Value: ptr.Deref(wl.Spec.Priority, 0), Class: wl.Spec.PriorityClassName, Source: wl.Spec.PriorityClassSource}
	}
	if hub {
		v.Role = roleHub
	}
	if v.Queue == "" {
		v.Queue = job.Object().GetLabels()[strata.QueueNameLabel]
	}
	if !hub && (wl.Labels[strata.HubWorkloadUIDLabel] != "" || workload.PinnedFlavor(wl) != "" || wl.Annotations[strata.PodSetFlavorsAnnotation] != "") {
		v.Dispatch = &DispatchView{
			Origin:         wl.Labels[strata.OriginLabel],
			HubWorkloadUID: wl.Labels[strata.HubWorkloadUIDLabel],
			Generation:     wl.Labels[strata.DispatchGenerationLabel],
			Flavor:         workload.PinnedFlavor(wl),
			PodSetFlavors:  wl.Annotations[strata.PodSetFlavorsAnnotation],
		}
	}
	if p := wl.Status.Placement; p != nil {
		v.Placement = &PlacementView{Cluster: p.Cluster, Flavor: p.Flavor, DispatchGeneration: p.DispatchGeneration, PreemptUpTo: p.PreemptUpTo,
			PodSetCounts: workload.FormatPodSetCounts(p.PodSetCounts)}
		if len(p.PodSetFlavors) > 0 {
			v.Placement.PodSetFlavors = workload.FormatPodSetFlavors(p.PodSetFlavors)
		}
		for _, a := range p.Attempts {
			v.Placement.Attempts = append(v.Placement.Attempts, AttemptView{
				Cluster: a.Cluster, Flavor: a.Flavor, DispatchGeneration: a.DispatchGeneration,
				Result: string(a.Result), Time: a.Time, Message: a.Message,
			})
		}
	}
	if a := wl.Status.Admission; a != nil {
		v.Admission = &AdmissionView{ClusterQueue: a.ClusterQueue, PodSets: []PodSetAdmissionView{}}
		for _, ps := range a.PodSetAssignments {
			v.Admission.PodSets = append(v.Admission.PodSets, podSetAdmission(ps))
		}
	}
	for _, n := range wl.Status.UnhealthyNodes {
		v.UnhealthyNodes = append(v.UnhealthyNodes, n.Name)
	}
	return v
}

// podSetAdmission decodes a pod set's compact topology assignment.
func podSetAdmission(ps strata.PodSetAssignment) PodSetAdmissionView {
	v := PodSetAdmissionView{Name: ps.Name, Flavor: ps.Flavor, Count: ps.Count}
	if ps.DelayedTopologyRequest != nil {
		v.DelayedTopologyRequest = string(*ps.DelayedTopologyRequest)
	}
	if ps.TopologyAssignment == nil {
		return v
	}
	a, err := tas.Decode(ps.TopologyAssignment)
	if err != nil {
		v.Problem = "the topology assignment does not decode: " + err.Error()
		return v
	}
	v.Levels = a.Levels
	for _, d := range a.Domains {
		v.Domains = append(v.Domains, AssignedDomainView{Values: d.Values, Pods: d.Count})
	}
	return v
}

// writeExplain prints the view as labelled sections.
func writeExplain(w io.Writer, v ExplainView, now time.Time) error {
	var lines []string
	add := func(l ...string) { lines = append(lines, l...) }
	kind := "Job:"
	if v.Job.Kind != "" {
		kind = v.Job.Kind + ":"
	}
	add(fmt.Sprintf("%-12s%s/%s", kind, v.Job.Namespace, v.Job.Name),
		fmt.Sprintf("Workload:   %s (on the %s)", v.Workload, v.Role),
		fmt.Sprintf("Queue:      %s", v.Queue))
	if p := v.Priority; p != nil {
		line := fmt.Sprintf("Priority:   %d", p.Value)
		switch {
		case p.Source == strata.WorkloadPriorityClassSource:
			line += fmt.Sprintf(" (WorkloadPriorityClass %s)", p.Class)
		case p.Class != "":
			line += fmt.Sprintf(" (PriorityClass %s)", p.Class)
		}
		add(line)
	}
	if p := v.Position; p != nil {
		add(fmt.Sprintf("Position:   %d of %d in ClusterQueue %s", p.Position, p.Of, p.ClusterQueue))
	}
	if v.Deleting != "" {
		add(wrap("Deleting:   ", "            ", v.Deleting)...)
	}
	add(conditionLines("Admitted:", v.Admitted, now)...)
	if v.QuotaReserved != nil {
		add(conditionLines("Reserved:", v.QuotaReserved, now)...)
	}
	for _, c := range v.Checks {
		first := fmt.Sprintf("  check %s: %s", c.Name, c.State)
		if c.LastTransitionTime != nil {
			first += fmt.Sprintf(" (for %s)", age(c.LastTransitionTime, now))
		}
		if c.Message != "" {
			first += ": "
		}
		add(wrap(first, "      ", c.Message)...)
	}
	if v.Invalid != nil && v.Invalid.Status == metav1.ConditionTrue {
		add(conditionLines("Invalid:", v.Invalid, now)...)
	}
	if v.Evicted != nil && v.Evicted.Status == metav1.ConditionTrue {
		add(conditionLines("Evicted:", v.Evicted, now)...)
	}
	if v.Preempted != nil && v.Preempted.Status == metav1.ConditionTrue {
		add(conditionLines("Preempted:", v.Preempted, now)...)
	}
	if v.CopyGoing != nil && v.CopyGoing.Status == metav1.ConditionTrue {
		add(conditionLines("Copy going:", v.CopyGoing, now)...)
	}
	if v.Unreachable != nil && v.Unreachable.Status == metav1.ConditionTrue {
		add(conditionLines("No answer:", v.Unreachable, now)...)
	}
	if v.PodsReady != nil {
		add(conditionLines("Pods ready:", v.PodsReady, now)...)
	}
	if v.Resized != nil {
		add(conditionLines("Resized:", v.Resized, now)...)
	}
	if rs := v.RequeueState; rs != nil && rs.Count != nil {
		line := fmt.Sprintf("Requeued:   %d time(s) for pods not ready in time", *rs.Count)
		if rs.RequeueAt != nil && v.Admission == nil && rs.RequeueAt.After(now) {
			line += "; queues again at " + rs.RequeueAt.UTC().Format(time.RFC3339)
		}
		add(line)
	}
	if v.TimeLimit != nil {
		add(v.TimeLimit.line(now))
	}
	if v.Finished != nil && v.Finished.Status == metav1.ConditionTrue {
		add(conditionLines("Finished:", v.Finished, now)...)
	}
	if d := v.Dispatch; d != nil {
		pinned := "flavor pinned: " + orDash(d.Flavor)
		if d.PodSetFlavors != "" {
			pinned = "pod sets pinned to flavors: " + d.PodSetFlavors
		}
		add(wrap("Dispatch:   ", "            ", fmt.Sprintf("copy of hub Workload %s (dispatch %s) from hub %s; %s",
			orDash(d.HubWorkloadUID), orDash(d.Generation), orDash(d.Origin), pinned))...)
	}
	if p := v.Placement; p != nil {
		switch {
		case p.Cluster != "":
			if p.PodSetFlavors != "" {
				add(fmt.Sprintf("Placement:  %s, pod sets on flavors %s (dispatch generation %d)", p.Cluster, p.PodSetFlavors, p.DispatchGeneration))
			} else {
				add(fmt.Sprintf("Placement:  %s, flavor %s (dispatch generation %d)", p.Cluster, orDash(p.Flavor), p.DispatchGeneration))
			}
			if p.PreemptUpTo != nil {
				add(fmt.Sprintf("            fits nowhere as the fleet stands: %s preempts workloads of priority ≤ %d for it", p.Cluster, *p.PreemptUpTo))
			}
			if p.PodSetCounts != "" {
				add(fmt.Sprintf("            with fewer pods than it asks for (partial admission): %s", p.PodSetCounts))
			}
		case p.DispatchGeneration > 0:
			add(fmt.Sprintf("Placement:  waiting on the hub (last dispatch generation %d)", p.DispatchGeneration))
		default:
			add("Placement:  waiting on the hub, never dispatched")
		}
		for _, a := range p.Attempts {
			first := fmt.Sprintf("  #%d %s/%s %s %s ago", a.DispatchGeneration, a.Cluster, orDash(a.Flavor), a.Result, age(&a.Time, now))
			if a.Message != "" {
				first += ": "
			}
			add(wrap(first, "      ", a.Message)...)
		}
	} else if v.Role == roleHub {
		add("Placement:  waiting on the hub, never dispatched")
	}
	if err := writeLines(w, lines...); err != nil {
		return err
	}
	if v.Admission != nil {
		if err := writeAdmission(w, v.Admission); err != nil {
			return err
		}
	}
	if len(v.UnhealthyNodes) > 0 {
		return writeLines(w, wrap("Unhealthy:  ", "            ", strings.Join(v.UnhealthyNodes, ", ")+" (replacements being searched)")...)
	}
	return nil
}

// conditionLines is "Admitted:   False  Pending (5m)" and the message
// below it, or "Unknown" without the condition.
func conditionLines(label string, c *ConditionView, now time.Time) []string {
	head := fmt.Sprintf("%-12s", label)
	if c == nil {
		return []string{head + "Unknown (no condition yet)"}
	}
	head += string(c.Status)
	if c.Reason != "" {
		head += "  " + c.Reason
	}
	if c.LastTransitionTime != nil {
		head += fmt.Sprintf(" (for %s)", age(c.LastTransitionTime, now))
	}
	lines := []string{head}
	if c.Message != "" {
		lines = append(lines, wrap("            ", "            ", c.Message)...)
	}
	return lines
}

// writeAdmission prints the admission: per pod set its flavor and the pods
// of each domain (the first maxDomainLines of them).
func writeAdmission(w io.Writer, a *AdmissionView) error {
	if _, err := fmt.Fprintf(w, "Admission:  ClusterQueue %s\n", a.ClusterQueue); err != nil {
		return err
	}
	for _, ps := range a.PodSets {
		head := fmt.Sprintf("  %s: %d pods on flavor %s", ps.Name, ps.Count, ps.Flavor)
		switch {
		case len(ps.Levels) == 1 && ps.Levels[0] == strata.HostnameLabel:
			head += fmt.Sprintf(", on %d hosts", len(ps.Domains))
		case len(ps.Levels) > 0:
			names := make([]string, len(ps.Levels))
			for i, l := range ps.Levels {
				names[i] = tas.LevelName(l)
			}
			head += fmt.Sprintf(", in %d %s domains (%s)", len(ps.Domains), names[len(names)-1], strings.Join(names, " > "))
		case ps.DelayedTopologyRequest == string(strata.DelayedTopologyRequestPending):
			head += ", its topology assigned once every admission check is Ready (delayed for a ProvisioningRequest)"
		}
		if _, err := fmt.Fprintln(w, head); err != nil {
			return err
		}
		if ps.Problem != "" {
			if err := writeLines(w, wrap("    ", "    ", ps.Problem)...); err != nil {
				return err
			}
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for i, d := range ps.Domains {
			if i == maxDomainLines {
				fmt.Fprintf(tw, "    ... and %d more (-o yaml lists all)\n", len(ps.Domains)-i)
				break
			}
			fmt.Fprintf(tw, "    %s\t%d pods\n", strings.Join(d.Values, "/"), d.Pods)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
