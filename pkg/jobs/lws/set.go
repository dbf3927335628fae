package lws

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsapi "sigs.k8s.io/lws/api/leaderworkerset/v1"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/intake"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/workload"
)

// Through the hub a LeaderWorkerSet is one workload: it goes to one worker
// and flavor, where every group must fit. Its hub Workload has the pod
// sets of every group, named after the group's ("leader-0", "worker-0",
// "leader-1", ...), each group's podset-group-name suffixed with its index
// so that groups stay independent of each other; a Workload holds at most
// MaxPodSets pod sets, so a set through the hub has at most that many
// groups' worth. On the worker, the copy is admitted group by group, as
// any LeaderWorkerSet there; the hub reads the groups' Workloads as one
// (Aggregate).

// SetWorkloadPrefix starts the names of the hub Workloads of whole
// LeaderWorkerSets.
const SetWorkloadPrefix = "lwsset-"

// MaxPodSets is the most pod sets a Workload holds (the API's bound).
const MaxPodSets = workload.MaxPodSets

// setKind is the jobs.Kind of whole LeaderWorkerSets.
type setKind struct{}

// SetKind is the kind of whole LeaderWorkerSets, as the hub dispatches
// them.
var SetKind jobs.Kind = setKind{}

// GroupVersionKind is LeaderWorkerSet's.
func (setKind) GroupVersionKind() schema.GroupVersionKind { return GVK }

// WorkloadName is the hub Workload of the LeaderWorkerSet name.
func (setKind) WorkloadName(name string) string { return workload.NameFor(SetWorkloadPrefix, name) }

// NewObject returns an empty LeaderWorkerSet.
func (setKind) NewObject() client.Object { return &lwsapi.LeaderWorkerSet{} }

// Adapt wraps a LeaderWorkerSet.
func (setKind) Adapt(obj client.Object) (jobs.Job, bool) {
	l, ok := obj.(*lwsapi.LeaderWorkerSet)
	if !ok {
		return nil, false
	}
	return Set{LeaderWorkerSet: l}, true
}

// List lists LeaderWorkerSets.
func (setKind) List(ctx context.Context, c client.Reader, opts ...client.ListOption) ([]jobs.Job, error) {
	var list lwsapi.LeaderWorkerSetList
	if err := c.List(ctx, &list, opts...); err != nil {
		return nil, err
	}
	out := make([]jobs.Job, len(list.Items))
	for i := range list.Items {
		out[i] = Set{LeaderWorkerSet: &list.Items[i]}
	}
	return out, nil
}

// WorkerWorkloads are the Workloads a worker keeps for the set: one per
// group; group 0's alone, which says the set is Invalid, when it has more
// than MaxGroups (never a name per group the set merely asks for).
func (setKind) WorkerWorkloads(obj client.Object) []string {
	l, ok := obj.(*lwsapi.LeaderWorkerSet)
	if !ok {
		return nil
	}
	out := make([]string, workerGroups(l))
	for i := range out {
		out[i] = GroupWorkloadName(l.Name, int32(i))
	}
	return out
}

// WorkerJobs are the set's groups, as a worker admits them: group 0
// alone, invalid, when the set has more than MaxGroups.
func (setKind) WorkerJobs(obj client.Object) []jobs.Job {
	l, ok := obj.(*lwsapi.LeaderWorkerSet)
	if !ok {
		return nil
	}
	out := make([]jobs.Job, workerGroups(l))
	for i := range out {
		out[i] = Group{LeaderWorkerSet: l, Index: int32(i)}
	}
	return out
}

// HubWorkload is the hub Workload whose copy's group Workload wl is: the
// set's, named after the LeaderWorkerSet that owns wl; false for another
// Workload.
func (setKind) HubWorkload(wl *strata.Workload) (string, bool) {
	for _, ref := range wl.OwnerReferences {
		if ref.Kind == GVK.Kind && strings.HasPrefix(ref.APIVersion, GVK.Group+"/") {
			return SetKind.WorkloadName(ref.Name), true
		}
	}
	return "", false
}

// Aggregate is one Workload standing for a set's group Workloads on a
// worker (nil where a group has none yet), as the hub judges a copy:
// Invalid when the set has more than MaxGroups groups or a group of more
// than workload.MaxPodSetPods pods; Invalid or Inadmissible when a group
// is; admitted once every group is, with each group's pod set assignments
// under the hub's pod set names; otherwise waiting as the first group not
// admitted waits. nil when no group has a Workload yet.
func (setKind) Aggregate(obj client.Object, wls []*strata.Workload) *strata.Workload {
	l, ok := obj.(*lwsapi.LeaderWorkerSet)
	if !ok {
		return nil
	}
	var first *strata.Workload
	for _, wl := range wls {
		if wl != nil {
			first = wl
			break
		}
	}
	if first == nil {
		return nil
	}
	out := &strata.Workload{ObjectMeta: *first.ObjectMeta.DeepCopy()}
	out.Name = SetKind.WorkloadName(l.Name)
	if errs := validateSizes(l); len(errs) > 0 {
		// Its agent keeps group 0's Workload alone, and may not have said
		// so yet: the copy is what a tenant of the worker made it.
		meta.SetStatusCondition(&out.Status.Conditions, metav1.Condition{Type: strata.WorkloadInvalid, Status: metav1.ConditionTrue,
			Reason: intake.ReasonInvalidJob, Message: errs.ToAggregate().Error()})
		return out
	}
	admission := &strata.Admission{}
	var waiting *strata.Workload
	for i, wl := range wls {
		if wl == nil {
			if waiting == nil {
				waiting = &strata.Workload{}
			}
			continue
		}
		if c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadInvalid); c != nil && c.Status == metav1.ConditionTrue {
			meta.SetStatusCondition(&out.Status.Conditions, groupCondition(*c, i))
			return out
		}
		if wl.Spec.Active != nil && !*wl.Spec.Active {
			// A group its worker deactivated (past waitForPodsReady's
			// backoffLimitCount) deactivates the copy, as a Job's would.
			takeGroupState(out, wl, i)
			return out
		}
		if wl.Status.Admission == nil {
			if c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted); c != nil && c.Status == metav1.ConditionFalse && slices.Contains(refusals, c.Reason) {
				// A group its worker will not admit decides the copy, whatever
				// the groups before it wait for.
				takeGroupState(out, wl, i)
				meta.SetStatusCondition(&out.Status.Conditions, groupCondition(*c, i))
				return out
			}
			if waiting == nil {
				waiting = wl
			}
			continue
		}
		admission.ClusterQueue = wl.Status.Admission.ClusterQueue
		for _, a := range wl.Status.Admission.PodSetAssignments {
			a = *a.DeepCopy()
			a.Name = groupPodSetName(a.Name, int32(i))
			admission.PodSetAssignments = append(admission.PodSetAssignments, a)
		}
	}
	if waiting != nil {
		out.Status.Conditions = nil
		for _, c := range waiting.Status.Conditions {
			meta.SetStatusCondition(&out.Status.Conditions, c)
		}
		out.Status.RequeueState = waiting.Status.RequeueState.DeepCopy()
		return out
	}
	out.Status.Admission = admission
	meta.SetStatusCondition(&out.Status.Conditions, metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionTrue,
		Reason: "Admitted", Message: fmt.Sprintf("all %d groups admitted", len(wls))})
	return out
}

// takeGroupState gives the copy's Workload the state of group i's that
// decides it: its retry count and backoff (requeueState), whether it is
// active, and its Evicted and Requeued conditions, so that the hub counts
// a set's evictions and deactivates it as it does a Job's.
func takeGroupState(out, wl *strata.Workload, i int) {
	out.Status.RequeueState = wl.Status.RequeueState.DeepCopy()
	if wl.Spec.Active != nil {
		out.Spec.Active = new(*wl.Spec.Active)
	}
	out.Status.Conditions = nil
	for _, t := range []string{strata.WorkloadEvicted, strata.WorkloadRequeued, strata.WorkloadAdmitted} {
		if c := meta.FindStatusCondition(wl.Status.Conditions, t); c != nil {
			meta.SetStatusCondition(&out.Status.Conditions, groupCondition(*c, i))
		}
	}
}

// refusals are the reasons of a group Workload's Admitted=False condition
// that say its worker will not admit it as sent (see the hub's Judge):
// inadmissible there, its queue stopped, or its pods not ready in time.
var refusals = []string{"Inadmissible", strata.QueueStopped, strata.EvictedByClusterQueueStopped, strata.EvictedByLocalQueueStopped, strata.EvictedByPodsReadyTimeout, strata.QueueAdmissionCheckNotReady}

// groupCondition is a group Workload's condition, said of its group.
func groupCondition(c metav1.Condition, group int) metav1.Condition {
	c.Message = fmt.Sprintf("group %d: %s", group, c.Message)
	return c
}

// groupPodSetName is the hub's name of a group's pod set.
func groupPodSetName(name string, group int32) string {
	return name + "-" + strconv.Itoa(int(group))
}

// GroupHint is the part of a copy's topology hint annotation (the hub's
// placement of the whole set, by the hub's pod set names) that concerns
// group index, by the group's pod set names: the hint of the group's
// Workload. "" when the hint has nothing for the group.
func GroupHint(hint string, group int32) (string, error) {
	var all map[string]json.RawMessage
	if err := json.Unmarshal([]byte(hint), &all); err != nil {
		return "", fmt.Errorf("annotation %s: %w", strata.TopologyHintAnnotation, err)
	}
	out := map[string]json.RawMessage{}
	for _, name := range []string{Leader, Worker, Main} {
		if a, ok := all[groupPodSetName(name, group)]; ok {
			out[name] = a
		}
	}
	if len(out) == 0 {
		return "", nil
	}
	if w, ok := out[Worker]; ok && out[Leader] == nil && out[Main] == nil {
		// A hub before 2026-12-02 named the one pod set of a group
		// without a leader template worker; it is main now.
		delete(out, Worker)
		out[Main] = w
	}
	data, err := json.Marshal(out)
	return string(data), err
}

// GroupPodSetFlavors is the part of a copy's strata.dev/pod-set-flavors
// annotation (the flavor of every pod set of the set, by the hub's pod
// set names: "leader-0=f1,worker-0=f2,...") that concerns group index, by
// the group's pod set names ("leader=f1,worker=f2"). "" when it names
// none of the group's pod sets; an error when it does not parse.
func GroupPodSetFlavors(v string, group int32) (string, error) {
	all := map[string]string{}
	for part := range strings.SplitSeq(v, ",") {
		name, flavor, ok := strings.Cut(part, "=")
		name, flavor = strings.TrimSpace(name), strings.TrimSpace(flavor)
		if !ok || name == "" || flavor == "" {
			return "", fmt.Errorf("annotation %s=%q: %q is not name=flavor", strata.PodSetFlavorsAnnotation, v, part)
		}
		all[name] = flavor
	}
	var out []string
	for _, name := range []string{Leader, Worker, Main} {
		if f, ok := all[groupPodSetName(name, group)]; ok {
			out = append(out, name+"="+f)
		}
	}
	return strings.Join(out, ","), nil
}

// Set is a whole LeaderWorkerSet as a jobs.Job, as the hub sees it.
type Set struct {
	*lwsapi.LeaderWorkerSet
}

// Object is the LeaderWorkerSet.
func (s Set) Object() client.Object { return s.LeaderWorkerSet }

// Kind is SetKind.
func (Set) Kind() jobs.Kind { return SetKind }

// PodSets are every group's pod sets, in group order, named after their
// group, each group's podset-group-name suffixed with its index.
func (s Set) PodSets() (out []strata.PodSet, errs field.ErrorList) {
	replicas := Replicas(s.LeaderWorkerSet)
	perGroup := int32(len(Group{LeaderWorkerSet: s.LeaderWorkerSet}.Templates()))
	path := field.NewPath("spec", "replicas")
	// An invalid set still gets the pod sets of the groups a Workload
	// holds (at least one): its Workload must pass the API's schema to
	// carry the Invalid condition that says what to fix.
	invalid := validateSize(s.LeaderWorkerSet)
	switch {
	case replicas == 0:
		invalid = append(field.ErrorList{field.Invalid(path, replicas, "a LeaderWorkerSet of no groups has nothing to dispatch")}, invalid...)
		replicas = 1
	case replicas > MaxPodSets/perGroup: // not replicas × perGroup: it would wrap
		invalid = append(field.ErrorList{field.Invalid(path, replicas, fmt.Sprintf(
			"through the hub a LeaderWorkerSet has at most %d groups (a Workload holds %d pod sets, %d per group): submit it on a worker cluster, or split it",
			MaxPodSets/perGroup, MaxPodSets, perGroup))}, invalid...)
		replicas = MaxPodSets / perGroup
	}
	defer func() { errs = append(invalid, errs...) }()
	for i := range replicas {
		sets, gerrs := Group{LeaderWorkerSet: s.LeaderWorkerSet, Index: i}.podSets()
		if i == 0 {
			errs = gerrs // the same templates: said once
		}
		for _, ps := range sets {
			ps.Name = groupPodSetName(ps.Name, i)
			if r := ps.TopologyRequest; r != nil && r.PodSetGroupName != nil {
				r.PodSetGroupName = ptr.To(groupPodSetName(*r.PodSetGroupName, i))
			}
			out = append(out, ps)
		}
	}
	return out, errs
}

// Templates are every group's templates, in the order of PodSets (the
// set's templates, once per group).
func (s Set) Templates() []*corev1.PodTemplateSpec {
	var out []*corev1.PodTemplateSpec
	perGroup := len(Group{LeaderWorkerSet: s.LeaderWorkerSet}.Templates())
	groups := min(max(Replicas(s.LeaderWorkerSet), 1), int32(MaxPodSets/perGroup))
	for range groups {
		out = append(out, Group{LeaderWorkerSet: s.LeaderWorkerSet}.Templates()...)
	}
	return out
}

// AllTemplates are the set's leader template, when it has one, and its
// workers' template, which Templates leaves out when each group is its
// leader alone.
func (s Set) AllTemplates() []*corev1.PodTemplateSpec {
	tmpl := &s.Spec.LeaderWorkerTemplate
	if tmpl.LeaderTemplate == nil {
		return []*corev1.PodTemplateSpec{&tmpl.WorkerTemplate}
	}
	return []*corev1.PodTemplateSpec{tmpl.LeaderTemplate, &tmpl.WorkerTemplate}
}

// Suspended is false: a LeaderWorkerSet cannot be suspended.
func (Set) Suspended() bool { return false }

// SetSuspended does nothing: a LeaderWorkerSet cannot be suspended.
func (Set) SetSuspended(bool) {}

// TemplatesMutable is false: a template change rolls the groups.
func (Set) TemplatesMutable() bool { return false }

// Finished is false: a LeaderWorkerSet serves until it is deleted.
func (Set) Finished() (bool, string) { return false, "" }

// ReclaimablePods are none: a group serves until it is deleted.
func (Set) ReclaimablePods() []strata.ReclaimablePod { return nil }

// ManagedBy is strata.ManagedByController when every pod template of the
// set carries the topology scheduling gate (the hub chart's admission
// policy puts it there on creation): LeaderWorkerSet v0.9 has no
// spec.managedBy, and a LeaderWorkerSet controller on the hub would
// create pods that nothing there ungates. "" otherwise.
func (s Set) ManagedBy() string {
	for _, t := range (Group{LeaderWorkerSet: s.LeaderWorkerSet}).Templates() {
		gated := false
		for _, g := range t.Spec.SchedulingGates {
			gated = gated || workload.IsTopologyGate(g)
		}
		if !gated {
			return ""
		}
	}
	return strata.ManagedByController
}

// ForWorker is the LeaderWorkerSet as a group's ForWorker makes it (its
// templates keep their gate: the worker's agent releases the pods), the
// API's defaults set where a Go object leaves them empty, and
// strata.dev/dispatch-workloads its number of groups.
func (s Set) ForWorker() jobs.Job {
	c := Group{LeaderWorkerSet: s.LeaderWorkerSet}.ForWorker().(Group).LeaderWorkerSet
	if c.Spec.StartupPolicy == "" {
		c.Spec.StartupPolicy = lwsapi.LeaderCreatedStartupPolicy
	}
	if c.Spec.RolloutStrategy.Type == "" {
		c.Spec.RolloutStrategy.Type = lwsapi.RollingUpdateStrategyType
	}
	// The worker admits it group by group: its summary counts the dispatch
	// once every group's Workload is admitted.
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[strata.DispatchWorkloadsAnnotation] = strconv.Itoa(int(Replicas(c)))
	return Set{LeaderWorkerSet: c}
}

// MirrorStatus copies from's status.
func (s Set) MirrorStatus(from jobs.Job) bool {
	src, ok := from.(Set)
	return ok && Group{LeaderWorkerSet: s.LeaderWorkerSet}.MirrorStatus(Group{LeaderWorkerSet: src.LeaderWorkerSet})
}

// ClearRun zeroes the ready replicas.
func (s Set) ClearRun() bool { return Group{LeaderWorkerSet: s.LeaderWorkerSet}.ClearRun() }
