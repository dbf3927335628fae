// Package lws adapts LeaderWorkerSets (sigs.k8s.io/lws,
// leaderworkerset.x-k8s.io/v1). A LeaderWorkerSet is not one workload: each
// replica (group) — a leader and its workers — is admitted, placed and
// released on its own, as a Workload of two pod sets, "leader" (1 pod) and
// "worker" (size − 1 pods), named after the set and the group's index
// (GroupWorkloadName). Replicas are independent: a scale-up adds groups, a
// scale-down removes them. Without a leader template the leader is made
// from the worker template: one pod set "main" of size pods (Kueue's
// name; "worker" before 2026-12-02, which a group's Workload made then
// keeps).
//
// A LeaderWorkerSet has no suspension. Its pods are held by the topology
// scheduling gate, which the agent chart's admission policy puts in its
// templates when it is created, until their group is admitted; the agent
// then labels each pod with its group's Workload and pod set (PodLabels)
// and releases it into its domain, in rank order: the leader is rank 0,
// workers rank by leaderworkerset.sigs.k8s.io/worker-index (1 ... size−1).
// Following KEP-2724 ("Respect Pod Index order within Workers"), the
// worker pod set gets podIndexOffset 1 when there is a leader template and
// no podset-group-name, which leaves offsets to the group
// (workload.RankedPodSet), and no offset without a leader template.
//
// A rolling update replaces groups whole; a group's Workload records the
// template revision of its pods (RevisionAnnotation), and a group rolled to
// another revision gets a new Workload.
//
// The agent runs LeaderWorkerSets with their own controller, Reconciler
// (lws_controller.go), which Registration gives it; through the hub a set
// is one job, SetKind (set.go).
package lws

import (
	"context"
	"fmt"
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsapi "sigs.k8s.io/lws/api/leaderworkerset/v1"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/workload"
)

// Pod set names, in the Workload's order: Leader and Worker with a leader
// template, Main alone without one.
const (
	Leader = "leader"
	Worker = "worker"
	Main   = workload.MainPodSet
)

// Labels the LeaderWorkerSet controller puts on its pods.
const (
	NameLabel        = lwsapi.SetNameLabelKey
	GroupIndexLabel  = lwsapi.GroupIndexLabelKey
	WorkerIndexLabel = lwsapi.WorkerIndexLabelKey
)

// RevisionLabel is the LeaderWorkerSet controller's label of the template
// revision a pod was made from; a group's pods (leader and workers) share
// their leader's.
const RevisionLabel = lwsapi.RevisionKey

// RevisionAnnotation on a group's Workload records the template revision
// of the pods it holds. A group's leader made from another revision means
// the set's controller rolled that group to a new template: the group is
// then a new Workload, and the old one's pods count on their own until
// they are gone.
const RevisionAnnotation = "strata.dev/lws-template-revision"

// WorkloadPrefix starts the names of LeaderWorkerSet groups' Workloads.
const WorkloadPrefix = "lws-"

// GroupWorkloadName is the name of the Workload of group index of the
// LeaderWorkerSet name; also its pods' strata.dev/workload label.
func GroupWorkloadName(name string, index int32) string {
	return workload.NameFor(WorkloadPrefix, name+"-"+strconv.Itoa(int(index)))
}

// GVK is the LeaderWorkerSet kind.
var GVK = lwsapi.GroupVersion.WithKind("LeaderWorkerSet")

// Registration registers LeaderWorkerSets (pkg/jobs/kinds): as whole
// sets, SetKind, which the hub dispatches; the agent runs their groups
// with Reconciler.
var Registration = jobs.Registration{Kind: SetKind, ShortNames: []string{"lws"}, AddToScheme: lwsapi.AddToScheme, AgentController: setupAgent}

// GroupKind is the jobs.Kind of group index of LeaderWorkerSets: the kind
// of their Group jobs, whose Workload names are that group's.
type GroupKind int32

// GroupVersionKind is LeaderWorkerSet's.
func (GroupKind) GroupVersionKind() schema.GroupVersionKind { return GVK }

// WorkloadName is the Workload of the group of the LeaderWorkerSet name.
func (k GroupKind) WorkloadName(name string) string { return GroupWorkloadName(name, int32(k)) }

// NewObject returns an empty LeaderWorkerSet.
func (GroupKind) NewObject() client.Object { return &lwsapi.LeaderWorkerSet{} }

// Adapt wraps a LeaderWorkerSet's group of the kind's index.
func (k GroupKind) Adapt(obj client.Object) (jobs.Job, bool) {
	l, ok := obj.(*lwsapi.LeaderWorkerSet)
	if !ok {
		return nil, false
	}
	return Group{LeaderWorkerSet: l, Index: int32(k)}, true
}

// List lists LeaderWorkerSets, as their groups of the kind's index.
func (k GroupKind) List(ctx context.Context, c client.Reader, opts ...client.ListOption) ([]jobs.Job, error) {
	var list lwsapi.LeaderWorkerSetList
	if err := c.List(ctx, &list, opts...); err != nil {
		return nil, err
	}
	out := make([]jobs.Job, len(list.Items))
	for i := range list.Items {
		out[i] = Group{LeaderWorkerSet: &list.Items[i], Index: int32(k)}
	}
	return out, nil
}

// Replicas is the number of groups a LeaderWorkerSet asks for.
func Replicas(l *lwsapi.LeaderWorkerSet) int32 { return max(ptr.Deref(l.Spec.Replicas, 1), 0) }

// MaxSurge is the number of groups past Replicas a rolling update may add
// for a while (rolloutStrategy.rollingUpdateConfiguration.maxSurge, a
// percentage of the replicas rounded up, at most the replicas); 0 when it
// is unset or malformed.
func MaxSurge(l *lwsapi.LeaderWorkerSet) int32 {
	c := l.Spec.RolloutStrategy.RollingUpdateConfiguration
	if c == nil {
		return 0
	}
	replicas := Replicas(l)
	surge, err := intstr.GetScaledValueFromIntOrPercent(&c.MaxSurge, int(replicas), true)
	if err != nil || surge < 0 {
		return 0
	}
	return int32(min(surge, int(replicas)))
}

// MaxGroups is the most groups (replicas) a LeaderWorkerSet may have
// (workload.MaxGroups): a worker keeps a Workload per group.
const MaxGroups = workload.MaxGroups

// validateSizes refuses a set's replicas over MaxGroups and its size
// over workload.MaxPodSetPods (a group's pods).
func validateSizes(l *lwsapi.LeaderWorkerSet) field.ErrorList {
	var errs field.ErrorList
	if replicas := Replicas(l); replicas > MaxGroups {
		errs = append(errs, field.Invalid(field.NewPath("spec", "replicas"), replicas, fmt.Sprintf(
			"%d groups, more than the %d a LeaderWorkerSet may have under Strata (its worker cluster keeps a Workload per group); lower it, or split the set",
			replicas, MaxGroups)))
	}
	return append(errs, validateSize(l)...)
}

// validateSize refuses a set's size over workload.MaxPodSetPods.
func validateSize(l *lwsapi.LeaderWorkerSet) field.ErrorList {
	size := Size(l)
	return workload.ValidatePodCount(int64(size), field.NewPath("spec", "leaderWorkerTemplate", "size"), size, "size, a group's pods")
}

// workerGroups is the number of groups whose Workloads a worker keeps
// for the set: its replicas; only group 0, whose Workload says the set is
// Invalid, when they are more than MaxGroups.
func workerGroups(l *lwsapi.LeaderWorkerSet) int32 {
	if n := Replicas(l); n <= MaxGroups {
		return n
	}
	return 1
}

// Size is the number of pods of each group, the leader included.
func Size(l *lwsapi.LeaderWorkerSet) int32 {
	return max(ptr.Deref(l.Spec.LeaderWorkerTemplate.Size, 1), 1)
}

// Group is one group of a LeaderWorkerSet as a jobs.Job: the set is its
// object, and the group's Workload its Workload.
type Group struct {
	*lwsapi.LeaderWorkerSet
	Index int32
}

// Object is the LeaderWorkerSet.
func (g Group) Object() client.Object { return g.LeaderWorkerSet }

// Kind is the kind of the group's index.
func (g Group) Kind() jobs.Kind { return GroupKind(g.Index) }

// PodSets are leader (1 pod) and worker (size − 1 pods), or worker alone
// (size pods) without a leader template, with the topology requests of
// their templates' annotations. A set of more than MaxGroups groups, or
// of groups of more than workload.MaxPodSetPods pods, is invalid.
func (g Group) PodSets() ([]strata.PodSet, field.ErrorList) {
	out, errs := g.podSets()
	return out, append(validateSizes(g.LeaderWorkerSet), errs...)
}

// podSets are PodSets without the checks of the set's sizes.
func (g Group) podSets() ([]strata.PodSet, field.ErrorList) {
	var errs field.ErrorList
	var out []strata.PodSet
	size := Size(g.LeaderWorkerSet)
	tmpl := &g.Spec.LeaderWorkerTemplate
	base := field.NewPath("spec", "leaderWorkerTemplate")
	add := func(name string, t *corev1.PodTemplateSpec, count int32, path *field.Path) *strata.PodSet {
		ps := strata.PodSet{Name: name, Count: count, Template: *t.DeepCopy()}
		req, reqErrs := workload.ParseTopologyRequest(t.Annotations, count, 0, path.Child("metadata", "annotations"))
		errs = append(errs, reqErrs...)
		if !workload.RequestUsable(reqErrs) {
			req = nil // invalid values may break the Workload schema
		}
		if req != nil {
			req.PodIndexLabel = ptr.To(WorkerIndexLabel)
		}
		ps.TopologyRequest = req
		out = append(out, ps)
		return &out[len(out)-1]
	}
	if tmpl.LeaderTemplate == nil {
		add(Main, &tmpl.WorkerTemplate, size, base.Child("workerTemplate"))
		return out, errs
	}
	add(Leader, tmpl.LeaderTemplate, 1, base.Child("leaderTemplate"))
	if size > 1 {
		w := add(Worker, &tmpl.WorkerTemplate, size-1, base.Child("workerTemplate"))
		if r := w.TopologyRequest; r != nil && r.PodSetGroupName == nil {
			// The leader is rank 0; workers' indexes start at 1.
			r.PodIndexOffset = ptr.To[int32](1)
		}
	}
	return out, errs
}

// AdjustWorkload gives the group's Workload its part of the set's
// topology hint (a hub's copy carries the placement of every group, by
// the hub's pod set names); a hint that does not parse is left out, and
// the agent places the group on its own. So for the flavors the hub
// placed the set's pod sets on (strata.dev/pod-set-flavors), except that
// an annotation that does not parse, or names none of the group's pod
// sets, is kept as it is: the agent says why it cannot admit the group
// on it, as it would of a Job's.
func (g Group) AdjustWorkload(wl *strata.Workload) {
	if v, ok := wl.Annotations[strata.PodSetFlavorsAnnotation]; ok {
		if mine, err := GroupPodSetFlavors(v, g.Index); err == nil && mine != "" {
			wl.Annotations[strata.PodSetFlavorsAnnotation] = mine
		}
	}
	hint, ok := wl.Annotations[strata.TopologyHintAnnotation]
	if !ok {
		return
	}
	mine, err := GroupHint(hint, g.Index)
	if err != nil || mine == "" {
		delete(wl.Annotations, strata.TopologyHintAnnotation)
		return
	}
	wl.Annotations[strata.TopologyHintAnnotation] = mine
}

// Templates are the leader's (when the set has one) and the workers' pod
// templates, in the order of PodSets.
func (g Group) Templates() []*corev1.PodTemplateSpec {
	tmpl := &g.Spec.LeaderWorkerTemplate
	if tmpl.LeaderTemplate == nil {
		return []*corev1.PodTemplateSpec{&tmpl.WorkerTemplate}
	}
	if Size(g.LeaderWorkerSet) > 1 {
		return []*corev1.PodTemplateSpec{tmpl.LeaderTemplate, &tmpl.WorkerTemplate}
	}
	return []*corev1.PodTemplateSpec{tmpl.LeaderTemplate}
}

// Suspended is false: a LeaderWorkerSet's pods are held by their gate.
func (Group) Suspended() bool { return false }

// SetSuspended does nothing: a LeaderWorkerSet cannot be suspended.
func (Group) SetSuspended(bool) {}

// TemplatesMutable is false: a template change rolls the groups.
func (Group) TemplatesMutable() bool { return false }

// Finished is false: a LeaderWorkerSet serves until it is deleted.
func (Group) Finished() (bool, string) { return false, "" }

// ReclaimablePods are none: a group serves until it is deleted.
func (Group) ReclaimablePods() []strata.ReclaimablePod { return nil }

// ManagedBy is "": LeaderWorkerSet v0.9 has no spec.managedBy.
func (Group) ManagedBy() string { return "" }

// ForWorker is the LeaderWorkerSet with its name, namespace, labels,
// annotations and spec.
func (g Group) ForWorker() jobs.Job {
	c := &lwsapi.LeaderWorkerSet{Spec: *g.Spec.DeepCopy()}
	c.Name, c.Namespace = g.Name, g.Namespace
	c.Labels, c.Annotations = maps.Clone(g.Labels), maps.Clone(g.Annotations)
	return Group{LeaderWorkerSet: c, Index: g.Index}
}

// MirrorStatus copies from's status.
func (g Group) MirrorStatus(from jobs.Job) bool {
	src, ok := from.(Group)
	if !ok || equality.Semantic.DeepEqual(g.Status, src.Status) {
		return false
	}
	g.Status = *src.Status.DeepCopy()
	return true
}

// ClearRun zeroes the ready replicas.
func (g Group) ClearRun() bool {
	changed := false
	for _, n := range []*int32{&g.Status.ReadyReplicas, &g.Status.Replicas, &g.Status.UpdatedReplicas} {
		if *n != 0 {
			*n, changed = 0, true
		}
	}
	// The mirrored Available condition said the groups ran: none does.
	for i := range g.Status.Conditions {
		c := &g.Status.Conditions[i]
		if c.Type == string(lwsapi.LeaderWorkerSetAvailable) && c.Status == metav1.ConditionTrue {
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, RunTakenBackReason, "its run on a worker was taken back; it waits to be placed again"
			c.LastTransitionTime = metav1.Now()
			changed = true
		}
	}
	return changed
}

// RunTakenBackReason is the reason of the Available condition the hub sets
// False on a LeaderWorkerSet whose copy it took back.
const RunTakenBackReason = "RunTakenBack"

// IsLeader says whether a pod of a LeaderWorkerSet is its group's leader
// (worker index 0), with or without a leader template.
func IsLeader(p *corev1.Pod) bool { return p.Labels[WorkerIndexLabel] == "0" }

// PodOf says which group and pod set a pod of a LeaderWorkerSet belongs
// to, from the labels its controller gives it; false when they are
// missing or malformed.
func PodOf(l *lwsapi.LeaderWorkerSet, p *corev1.Pod) (group int32, podSet string, ok bool) {
	if p.Labels[NameLabel] != l.Name {
		return 0, "", false
	}
	g, err := strconv.ParseInt(p.Labels[GroupIndexLabel], 10, 32)
	if err != nil || g < 0 {
		return 0, "", false
	}
	worker, err := strconv.ParseInt(p.Labels[WorkerIndexLabel], 10, 32)
	if err != nil || worker < 0 {
		return 0, "", false
	}
	switch {
	case l.Spec.LeaderWorkerTemplate.LeaderTemplate == nil:
		return int32(g), Main, true
	case worker == 0:
		return int32(g), Leader, true
	}
	return int32(g), Worker, true
}
