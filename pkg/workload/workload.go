package workload

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
)

// MainPodSet is the name of a Job's only pod set.
const MainPodSet = "main"

// FromJob builds the Workload of a batch/v1 Job labelled with the queue
// name (see Build and JobPodSets).
func FromJob(job *batchv1.Job) (*strata.Workload, field.ErrorList) {
	podSets, errs := JobPodSets(job)
	return Build("Job", &job.ObjectMeta, JobWorkloadName(job.Name), podSets, errs)
}

// JobPodSets returns the pod set of a batch/v1 Job: "main", of the pods it
// runs at once, with the topology request of its template's annotations,
// ranked by completion index when the Job is Indexed, and with the fewest
// pods it may be admitted with (JobMinCount). A Job a partial admission
// started counts as it asked (PartialAdmissionAnnotation). Errors point
// into the Job: more pods than MaxPodSetPods, annotations; the pod set then has
// no topology request, since invalid values may break the Workload
// schema.
func JobPodSets(job *batchv1.Job) ([]strata.PodSet, field.ErrorList) {
	job = JobAsAsked(job)
	count := JobPodCount(job)
	errs := validateJobPodCount(job, count)
	ps := strata.PodSet{Name: MainPodSet, Count: count, Template: *job.Spec.Template.DeepCopy()}
	if len(errs) == 0 {
		var minErrs field.ErrorList
		ps.MinCount, minErrs = JobMinCount(job, count)
		errs = append(errs, minErrs...)
	}
	req, reqErrs := ParseTopologyRequest(job.Spec.Template.Annotations, count, 0, field.NewPath("spec", "template", "metadata", "annotations"))
	errs = append(errs, reqErrs...)
	if !RequestUsable(errs) {
		req = nil
	}
	if req != nil && ptr.Deref(job.Spec.CompletionMode, batchv1.NonIndexedCompletion) == batchv1.IndexedCompletion {
		req.PodIndexLabel = ptr.To(strata.JobCompletionIndexLabel)
	}
	ps.TopologyRequest = req
	if job.Annotations[strata.ElasticJobAnnotation] == "true" {
		errs = append(errs, ValidateElastic(&ps, field.NewPath("spec", "template", "metadata", "annotations"))...)
	}
	return []strata.PodSet{ps}, errs
}

// Build builds the Workload, named name, of a queue-labelled object of
// the given kind with its pod sets: the queue, the priority class (see
// PriorityClass), and the labels and the annotations of the dispatch
// contract that a hub's copy carries and the unhealthy-nodes eviction
// threshold (see CarryDispatch), and the maximum execution time (see
// MaxExecTime). errs are the pod sets' errors; the missing queue label,
// an invalid threshold and an invalid maximum execution time are added
// to them. The
// Workload is returned with the errors, so that callers can record them
// on it.
func Build(kind string, obj *metav1.ObjectMeta, name string, podSets []strata.PodSet, errs field.ErrorList) (*strata.Workload, field.ErrorList) {
	queue := obj.Labels[strata.QueueNameLabel]
	if queue == "" {
		errs = append(field.ErrorList{field.Required(field.NewPath("metadata", "labels").Key(strata.QueueNameLabel),
			"names the ClusterQueue of the "+kind)}, errs...)
	}
	if _, _, terrs := UnhealthyNodesThreshold(obj.Annotations, field.NewPath("metadata", "annotations")); len(terrs) > 0 {
		errs = append(errs, terrs...)
	}
	maxExec, merrs := MaxExecTime(obj.Labels, field.NewPath("metadata", "labels"))
	errs = append(errs, merrs...)
	class, source := PriorityClass(obj.Labels, podSets)
	wl := &strata.Workload{
		// The job's labels, for topology spreading's workloadLabelSelectors.
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: obj.Namespace, Labels: maps.Clone(obj.Labels)},
		Spec: strata.WorkloadSpec{QueueName: queue, PriorityClassName: class, PriorityClassSource: source, PodSets: podSets,
			MaximumExecutionTimeSeconds: maxExec},
	}
	CarryDispatch(&wl.ObjectMeta, obj)
	// Parameters of the ProvisioningRequests made for it, as Kueue's
	// Workload carries them.
	for k, v := range obj.Annotations {
		if strings.HasPrefix(k, strata.ProvisioningRequestParameterPrefix) {
			metav1.SetMetaDataAnnotation(&wl.ObjectMeta, k, v)
		}
	}
	return wl, errs
}

// PriorityClass is the class a job's Workload takes its priority from,
// and the Workload's priorityClassSource, as in Kueue: the
// WorkloadPriorityClass the job's labels name (strata.dev/priority-class,
// else kueue.x-k8s.io/priority-class), which leaves the pods' priority
// alone; without one, the PriorityClass of the first pod set whose
// template names one (a JobSet's driver may name none, its workers one);
// "" and "" when there is neither.
func PriorityClass(labels map[string]string, podSets []strata.PodSet) (name, source string) {
	for _, l := range []string{strata.PriorityClassLabel, strata.KueuePriorityClassLabel} {
		if v := labels[l]; v != "" {
			return v, strata.WorkloadPriorityClassSource
		}
	}
	for _, ps := range podSets {
		if v := ps.Template.Spec.PriorityClassName; v != "" {
			return v, strata.PodPriorityClassSource
		}
	}
	return "", ""
}

// dispatchLabels are the labels a hub puts on its copy of a Job, which the
// copy's Workload carries.
var dispatchLabels = []string{strata.OriginLabel, strata.HubWorkloadUIDLabel, strata.DispatchGenerationLabel}

// dispatchAnnotations are the annotations a hub puts on its copy of a Job,
// which the copy's Workload carries.
var dispatchAnnotations = []string{strata.FlavorAnnotation, strata.DispatchTimeAnnotation, strata.TopologyHintAnnotation, strata.DispatchWorkloadsAnnotation,
	strata.PreemptUpToAnnotation, strata.RequeueCountAnnotation, strata.PodSetCountsAnnotation, strata.PodSetFlavorsAnnotation}

// CarryDispatch copies to dst the dispatch contract's labels and
// annotations that src has and dst lacks, and the unhealthy-nodes
// eviction threshold; it removes and overwrites nothing. A hub's copy is
// created with them and they never change: a value changed on the copy
// afterwards is a tenant's edit, and carrying it would let the copy's
// Workload pass for another dispatch (one not fenced or revoked). It says
// whether dst changed.
func CarryDispatch(dst, src *metav1.ObjectMeta) bool {
	changed := carryUnhealthyNodesThreshold(dst, src)
	for _, k := range dispatchLabels {
		if v, ok := src.Labels[k]; ok {
			if _, had := dst.Labels[k]; !had {
				metav1.SetMetaDataLabel(dst, k, v)
				changed = true
			}
		}
	}
	for _, k := range dispatchAnnotations {
		if v, ok := src.Annotations[k]; ok {
			if _, had := dst.Annotations[k]; !had {
				metav1.SetMetaDataAnnotation(dst, k, v)
				changed = true
			}
		}
	}
	return changed
}

// DispatchKey is the hub dispatch a Workload belongs to, as a capacity
// summary lists it: "<hub workload UID>/<dispatch generation>", from its
// strata.dev/hub-workload-uid and strata.dev/dispatch-generation labels.
// It returns "" unless both are set.
func DispatchKey(wl *strata.Workload) string {
	uid, gen := wl.Labels[strata.HubWorkloadUIDLabel], wl.Labels[strata.DispatchGenerationLabel]
	if uid == "" || gen == "" {
		return ""
	}
	return uid + "/" + gen
}

// DispatchWorkloads is how many Workloads a worker keeps for the hub
// dispatch wl belongs to (the strata.dev/dispatch-workloads annotation; 1
// without it, or when it does not parse).
func DispatchWorkloads(wl *strata.Workload) int {
	n, err := strconv.Atoi(wl.Annotations[strata.DispatchWorkloadsAnnotation])
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// Reclaimable is how many pods of pod set podSet status.reclaimablePods
// releases.
func Reclaimable(wl *strata.Workload, podSet string) int32 {
	for _, r := range wl.Status.ReclaimablePods {
		if r.Name != podSet {
			continue
		}
		// Counted against the pods the pod set asks for; an admission of
		// fewer (partial admission) holds only what it runs: of its pods,
		// those beyond what the rest of the job needs.
		if ps := PodSet(wl, podSet); ps != nil && wl.Status.Admission != nil {
			for _, psa := range wl.Status.Admission.PodSetAssignments {
				if psa.Name == podSet && psa.Count < ps.Count {
					return max(r.Count-(ps.Count-psa.Count), 0)
				}
			}
		}
		return r.Count
	}
	return 0
}

// IsActive says whether the workload may be dispatched or admitted:
// spec.active is not false (Kueue's deactivation holds it).
func IsActive(wl *strata.Workload) bool { return wl.Spec.Active == nil || *wl.Spec.Active }

// MoreReclaimable is the reclaimable pods an admitted workload records
// when its job reports now: never fewer for a pod set than recorded (as
// Kueue refuses a decrease while the quota is held). Capacity given back
// may already be someone else's: a JobSet that restarts its succeeded
// Jobs does not take it back. Pod sets in the order of now, then those
// only recorded.
func MoreReclaimable(recorded, now []strata.ReclaimablePod) []strata.ReclaimablePod {
	out := make([]strata.ReclaimablePod, 0, max(len(now), len(recorded)))
	for _, r := range now {
		if i := slices.IndexFunc(recorded, func(o strata.ReclaimablePod) bool { return o.Name == r.Name }); i >= 0 {
			r.Count = max(r.Count, recorded[i].Count)
		}
		out = append(out, r)
	}
	for _, o := range recorded {
		if !slices.ContainsFunc(out, func(r strata.ReclaimablePod) bool { return r.Name == o.Name }) {
			out = append(out, o)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// FlavorRefusal says why flavor cannot hold wl (or the pod sets of it
// given), whatever its capacity and quota: a pod set a hub pinned to
// another flavor (PinnedPodSetFlavors), or a taint of the flavor's that
// a pod set does not tolerate (UntoleratedFlavorTaint); "" when none.
func FlavorRefusal(flavor *strata.ResourceFlavor, wl *strata.Workload) string {
	if v, ok := wl.Annotations[strata.PodSetFlavorsAnnotation]; ok {
		pins, err := parsePodSetFlavors(v)
		if err != nil {
			return err.Error()
		}
		for i := range wl.Spec.PodSets {
			switch f := pins[wl.Spec.PodSets[i].Name]; f {
			case flavor.Name:
			case "":
				return fmt.Sprintf("annotation %s=%q: no flavor for pod set %s", strata.PodSetFlavorsAnnotation, v, wl.Spec.PodSets[i].Name)
			default:
				return fmt.Sprintf("the hub placed pod set %s on flavor %s (annotation %s)", wl.Spec.PodSets[i].Name, f, strata.PodSetFlavorsAnnotation)
			}
		}
	}
	return UntoleratedFlavorTaint(flavor, wl)
}

// UntoleratedFlavorTaint says which of a flavor's nodeTaints (NoSchedule
// or NoExecute) a pod set of wl does not tolerate, with the flavor's own
// tolerations, which its pods get: as in Kueue, the flavor cannot hold
// the workload ("" when every pod set tolerates them all).
func UntoleratedFlavorTaint(flavor *strata.ResourceFlavor, wl *strata.Workload) string {
	if len(flavor.Spec.NodeTaints) == 0 {
		return ""
	}
	hard := func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}
	for i := range wl.Spec.PodSets {
		tolerations := append(slices.Clone(wl.Spec.PodSets[i].Template.Spec.Tolerations), flavor.Spec.Tolerations...)
		if t, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Logger{}, flavor.Spec.NodeTaints, tolerations, hard, true); untolerated {
			return fmt.Sprintf("untolerated taint %s in flavor %s", t.ToString(), flavor.Name)
		}
	}
	return ""
}

// PreemptUpTo reads a hub copy's mark: the priority up to which it may
// preempt; ok is false when it has none or it is not a number.
func PreemptUpTo(wl *strata.Workload) (int32, bool) {
	v, ok := wl.Annotations[strata.PreemptUpToAnnotation]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(n), true
}

// FormatPodSetCounts is a hub's copy's strata.dev/pod-set-counts: the
// counts as "name=count,...".
func FormatPodSetCounts(counts []strata.PodSetCount) string {
	parts := make([]string, len(counts))
	for i, c := range counts {
		parts[i] = c.Name + "=" + strconv.FormatInt(int64(c.Count), 10)
	}
	return strings.Join(parts, ",")
}

// CappedCounts are the counts of a Workload's pod sets with the cap of a
// hub's copy (strata.dev/pod-set-counts) applied (ParsePodSetCounts). ok
// is false when the Workload has no cap.
func CappedCounts(wl *strata.Workload) (counts []int32, ok bool) {
	v, has := wl.Annotations[strata.PodSetCountsAnnotation]
	if !has {
		return nil, false
	}
	return ParsePodSetCounts(v, wl.Spec.PodSets), true
}

// ParsePodSetCounts applies counts written by FormatPodSetCounts to pod
// sets: a pod set gets at most its count there, and never fewer than its
// minCount. An entry that does not parse, names no pod set, or is not
// below the pod set's count leaves that count as it is.
func ParsePodSetCounts(v string, podSets []strata.PodSet) []int32 {
	caps := map[string]int32{}
	for _, part := range strings.Split(v, ",") {
		name, n, found := strings.Cut(strings.TrimSpace(part), "=")
		c, err := strconv.ParseInt(n, 10, 32)
		if found && err == nil && c > 0 {
			caps[name] = int32(c)
		}
	}
	counts := make([]int32, len(podSets))
	for i := range podSets {
		ps := &podSets[i]
		counts[i] = ps.Count
		if c, capped := caps[ps.Name]; capped && c < ps.Count {
			counts[i] = max(c, ptr.Deref(ps.MinCount, c))
		}
	}
	return counts
}

// PinnedFlavor is the ResourceFlavor a hub pinned the Workload to (the
// strata.dev/flavor annotation), or "" when it is not pinned.
func PinnedFlavor(wl *strata.Workload) string { return wl.Annotations[strata.FlavorAnnotation] }

// FlavorWords names a hub placement's flavor for messages: "flavor f",
// or, with its pod sets on different flavors (podSetFlavors), "flavors f1
// (pod set a), f2 (pod set b)".
func FlavorWords(p *strata.Placement) string {
	if p == nil {
		return "no flavor"
	}
	if len(p.PodSetFlavors) == 0 {
		return "flavor " + p.Flavor
	}
	parts := make([]string, len(p.PodSetFlavors))
	for i, f := range p.PodSetFlavors {
		parts[i] = fmt.Sprintf("%s (pod set %s)", f.Flavor, f.Name)
	}
	return "flavors " + strings.Join(parts, ", ")
}

// FormatPodSetFlavors is a hub's copy's strata.dev/pod-set-flavors: each
// pod set's flavor as "name=flavor,...", in the order given.
func FormatPodSetFlavors(flavors []strata.PodSetFlavor) string {
	parts := make([]string, len(flavors))
	for i, f := range flavors {
		parts[i] = f.Name + "=" + f.Flavor
	}
	return strings.Join(parts, ",")
}

// PinnedPodSetFlavors is the flavor a hub pinned each pod set of the
// Workload to (the strata.dev/pod-set-flavors annotation), by pod set
// name; nil when the Workload has no such annotation. An annotation that
// does not name every pod set exactly once with a flavor, or names a pod
// set the Workload does not have, is an error: the copy was not written
// by a hub, and no flavor may be guessed for it.
func PinnedPodSetFlavors(wl *strata.Workload) (map[string]string, error) {
	v, ok := wl.Annotations[strata.PodSetFlavorsAnnotation]
	if !ok {
		return nil, nil
	}
	pins, err := parsePodSetFlavors(v)
	if err != nil {
		return nil, err
	}
	for name := range pins {
		if !slices.ContainsFunc(wl.Spec.PodSets, func(ps strata.PodSet) bool { return ps.Name == name }) {
			return nil, fmt.Errorf("annotation %s=%q: the workload has no pod set %s", strata.PodSetFlavorsAnnotation, v, name)
		}
	}
	for i := range wl.Spec.PodSets {
		if pins[wl.Spec.PodSets[i].Name] == "" {
			return nil, fmt.Errorf("annotation %s=%q: no flavor for pod set %s", strata.PodSetFlavorsAnnotation, v, wl.Spec.PodSets[i].Name)
		}
	}
	return pins, nil
}

// parsePodSetFlavors reads FormatPodSetFlavors's "name=flavor,...": an
// entry that is not name=flavor, or a name given twice, is an error.
func parsePodSetFlavors(v string) (map[string]string, error) {
	pins := map[string]string{}
	for _, part := range strings.Split(v, ",") {
		name, flavor, found := strings.Cut(part, "=")
		name, flavor = strings.TrimSpace(name), strings.TrimSpace(flavor)
		switch {
		case !found || name == "" || flavor == "":
			return nil, fmt.Errorf("annotation %s=%q: %q is not name=flavor", strata.PodSetFlavorsAnnotation, v, part)
		case pins[name] != "":
			return nil, fmt.Errorf("annotation %s=%q: pod set %s is named twice", strata.PodSetFlavorsAnnotation, v, name)
		}
		pins[name] = flavor
	}
	return pins, nil
}

// JobWorkloadName is the name of a Job's Workload: "job-" and the Job's
// name (see NameFor).
func JobWorkloadName(job string) string { return NameFor("job-", job) }

// NameFor is the name of the Workload of an object: prefix and its name.
// It is also the value of the pods' strata.dev/workload label, so when that
// would be longer than a label value may be (63 characters), the name is
// cut and a hash of the whole name keeps the result unique. The result is
// a valid label value and DNS-1123 subdomain for every valid object name
// and a prefix of a few lowercase letters and "-".
func NameFor(prefix, name string) string {
	if len(prefix)+len(name) <= validation.LabelValueMaxLength {
		return prefix + name
	}
	sum := sha256.Sum256([]byte(name))
	hash := hex.EncodeToString(sum[:])[:jobNameHashLength]
	keep := validation.LabelValueMaxLength - len(prefix) - 1 - len(hash)
	// A label value and a DNS subdomain both need an alphanumeric character
	// before the "-" that joins the hash.
	head := strings.TrimRight(name[:keep], "-.")
	return prefix + head + "-" + hash
}

// jobNameHashLength is the number of hex digits of the hash in a shortened
// Workload name: 40 bits.
const jobNameHashLength = 10

// IsTopologyGate says whether g is Strata's scheduling gate.
func IsTopologyGate(g corev1.PodSchedulingGate) bool { return g.Name == strata.TopologySchedulingGate }

// TopologyGated says whether a pod still waits behind Strata's scheduling
// gate.
func TopologyGated(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Spec.SchedulingGates, IsTopologyGate)
}

// PodSet returns the workload's pod set of that name, or nil.
func PodSet(wl *strata.Workload, name string) *strata.PodSet {
	for i := range wl.Spec.PodSets {
		if wl.Spec.PodSets[i].Name == name {
			return &wl.Spec.PodSets[i]
		}
	}
	return nil
}

// JobPodCount is the number of pods a Job runs at once: its parallelism,
// capped by its completions; never negative.
func JobPodCount(job *batchv1.Job) int32 {
	n := ptr.Deref(job.Spec.Parallelism, 1)
	if c := job.Spec.Completions; c != nil && *c < n {
		n = *c
	}
	return max(n, 0)
}

// validateJobPodCount refuses a Job's count of pods at once (JobPodCount)
// over MaxPodSetPods, at the field it comes from.
func validateJobPodCount(job *batchv1.Job, count int32) field.ErrorList {
	var errs field.ErrorList
	for _, f := range []struct {
		name  string
		value *int32
	}{{"parallelism", job.Spec.Parallelism}, {"completions", job.Spec.Completions}} {
		if f.value != nil && *f.value < 0 {
			// The API server refuses it; simulate reads files.
			errs = append(errs, field.Invalid(field.NewPath("spec", f.name), *f.value, "must be greater than or equal to 0"))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	path, value := field.NewPath("spec", "parallelism"), ptr.Deref(job.Spec.Parallelism, 1)
	if c := job.Spec.Completions; c != nil && *c == count && *c < value {
		path, value = field.NewPath("spec", "completions"), *c
	}
	return ValidatePodCount(int64(count), path, value, "parallelism, capped by completions")
}

// ValidatePodSets checks the rules that span pod sets: when one pod set
// asks for a required or preferred level, all must; pod sets of one group
// must ask for the same level.
func ValidatePodSets(podSets []strata.PodSet, path *field.Path) field.ErrorList {
	if len(podSets) == 0 {
		// A JobSet without replicated jobs, an MPIJob without replica
		// specs: their own API validation refuses them; simulate reads
		// files.
		return field.ErrorList{field.Required(path, "the object has no pod template to run: no pod set")}
	}
	var errs field.ErrorList
	var with, without []string
	groups := map[string][]int{}
	for i, ps := range podSets {
		r := ps.TopologyRequest
		if r != nil && (r.Required != nil || r.Preferred != nil) {
			with = append(with, ps.Name)
		} else {
			without = append(without, ps.Name)
		}
		if r != nil && r.PodSetGroupName != nil {
			groups[*r.PodSetGroupName] = append(groups[*r.PodSetGroupName], i)
		}
	}
	if len(with) > 0 && len(without) > 0 {
		errs = append(errs, field.Invalid(path, strings.Join(without, ", "), fmt.Sprintf(
			"pod sets %s have no podset-required-topology or podset-preferred-topology while %s do; set one on every pod set",
			strings.Join(without, ", "), strings.Join(with, ", "))))
	}
	names := make([]string, 0, len(groups))
	for g := range groups {
		names = append(names, g)
	}
	slices.Sort(names)
	for _, g := range names {
		members := groups[g]
		first := podSets[members[0]].TopologyRequest
		for _, i := range members[1:] {
			r := podSets[i].TopologyRequest
			if !ptr.Equal(r.Required, first.Required) || !ptr.Equal(r.Preferred, first.Preferred) {
				errs = append(errs, field.Invalid(path.Index(i), podSets[i].Name, fmt.Sprintf(
					"pod set group %q: every member must set the same podset-required-topology or podset-preferred-topology as pod set %q",
					g, podSets[members[0]].Name)))
			}
		}
		if first.Required == nil && first.Preferred == nil {
			errs = append(errs, field.Required(path.Index(members[0]), fmt.Sprintf(
				"pod set group %q needs podset-required-topology or podset-preferred-topology", g)))
		}
		for _, i := range members[1:] {
			if !equality.Semantic.DeepEqual(podSets[i].TopologyRequest.TopologySpreading, first.TopologySpreading) {
				errs = append(errs, field.Invalid(path.Index(i), podSets[i].Name, fmt.Sprintf(
					"pod set group %q: every member must carry the same podset-topology-spreading as pod set %q, or none may", g, podSets[members[0]].Name)))
			}
		}
	}
	return errs
}

// TopologyMismatchError says that a request names levels a flavor's
// Topology does not have, or not in the order it has them: no change of
// capacity lets the request onto that flavor.
type TopologyMismatchError struct{ err error }

func (e *TopologyMismatchError) Error() string { return e.err.Error() }
func (e *TopologyMismatchError) Unwrap() error { return e.err }

// ValidateAgainstTopology checks the levels a request names against the
// levels of the flavor's Topology (highest first). Its errors are
// *TopologyMismatchError.
func ValidateAgainstTopology(r *strata.PodSetTopologyRequest, topology string, levels []string) error {
	if err := validateAgainstTopology(r, topology, levels); err != nil {
		return &TopologyMismatchError{err: err}
	}
	return nil
}

func validateAgainstTopology(r *strata.PodSetTopologyRequest, topology string, levels []string) error {
	if r == nil {
		return nil
	}
	index := func(annotation, level string) (int, error) {
		if i := slices.Index(levels, level); i >= 0 {
			return i, nil
		}
		return -1, fmt.Errorf("%s: %q is not a level of Topology %q (levels: %s)", annotation, level, topology, strings.Join(levels, ", "))
	}
	main := 0
	for _, m := range []struct {
		annotation string
		level      *string
	}{{requiredName, r.Required}, {preferredName, r.Preferred}} {
		if m.level != nil {
			i, err := index(m.annotation, *m.level)
			if err != nil {
				return err
			}
			main = i
		}
	}
	if r.PodSetSliceRequiredTopology != nil {
		i, err := index(sliceTopologyName, *r.PodSetSliceRequiredTopology)
		if err != nil {
			return err
		}
		if i < main {
			return fmt.Errorf("%s: %q is above the pod set's level %q; a slice must fit in a domain at or below it",
				sliceTopologyName, *r.PodSetSliceRequiredTopology, levels[main])
		}
	}
	if n := len(r.PodSetSliceRequiredTopologyConstraints); n > len(levels) {
		return fmt.Errorf("%s: %d layers for a topology of %d levels", constraintsName, n, len(levels))
	}
	prev := main - 1
	for k, c := range r.PodSetSliceRequiredTopologyConstraints {
		i, err := index(constraintsName, c.Topology)
		if err != nil {
			return err
		}
		if i <= prev {
			if k == 0 {
				return fmt.Errorf("%s: layer 0 level %q is above the pod set's level %q", constraintsName, c.Topology, levels[main])
			}
			return fmt.Errorf("%s: layers must go from the coarsest level to the finest; layer %d (%q) is not below layer %d", constraintsName, k, c.Topology, k-1)
		}
		prev = i
	}
	return nil
}

// Request builds the engine request of a pod set. A pod set without a
// topology request is unconstrained (KEP-2724's implicit default).
func Request(ps *strata.PodSet) tas.Request {
	req := tas.Request{
		Count:        ps.Count,
		PodRequests:  TemplateRequests(&ps.Template.Spec),
		Mode:         tas.Unconstrained,
		NodeSelector: ps.Template.Spec.NodeSelector,
		Tolerations:  ps.Template.Spec.Tolerations,
	}
	if a := ps.Template.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		req.NodeAffinity = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	r := ps.TopologyRequest
	if r == nil {
		return req
	}
	switch {
	case r.Required != nil:
		req.Mode, req.Level = tas.Required, *r.Required
	case r.Preferred != nil:
		req.Mode, req.Level = tas.Preferred, *r.Preferred
	}
	if r.PodSetSliceRequiredTopology != nil && r.PodSetSliceSize != nil {
		req.Layers = []tas.Layer{{Level: *r.PodSetSliceRequiredTopology, Size: *r.PodSetSliceSize}}
	}
	for _, c := range r.PodSetSliceRequiredTopologyConstraints {
		req.Layers = append(req.Layers, tas.Layer{Level: c.Topology, Size: c.Size})
	}
	req.Grouped = r.PodSetGroupName != nil
	return req
}

// RankedPodSet returns pod set i of podSets as its pods are ranked: a pod
// set of a group (podset-group-name) whose pod indexes have no offset of
// their own gets the group's, the number of pods in the group's earlier
// pod sets — KEP-2724 leaves the offset of grouped pod sets to the group:
// an LWS leader and its workers, or an MPIJob's launcher running as rank
// 0 and its workers, are ranked 0, 1, ... across the group. Otherwise the
// pod set itself.
func RankedPodSet(podSets []strata.PodSet, i int) *strata.PodSet {
	ps := &podSets[i]
	r := ps.TopologyRequest
	if r == nil || r.PodSetGroupName == nil || r.PodIndexLabel == nil || r.PodIndexOffset != nil {
		return ps
	}
	var offset int32
	for j := range i {
		if o := podSets[j].TopologyRequest; o != nil && o.PodSetGroupName != nil && *o.PodSetGroupName == *r.PodSetGroupName {
			offset += podSets[j].Count
		}
	}
	if offset == 0 {
		return ps
	}
	out := ps.DeepCopy()
	out.TopologyRequest.PodIndexOffset = &offset
	return out
}

// DefaultPriorityClass is the PriorityClass marked globalDefault of pcs,
// which the API server gives pods that name none (and Kueue the
// Workloads of their jobs); nil when there is none. Of several (the API
// server refuses a second, but a cache or a set of manifests may hold two
// for a moment), the one of the lowest value, then name.
func DefaultPriorityClass(pcs []*schedulingv1.PriorityClass) *schedulingv1.PriorityClass {
	var def *schedulingv1.PriorityClass
	for _, pc := range pcs {
		if pc != nil && pc.GlobalDefault && (def == nil || pc.Value < def.Value || pc.Value == def.Value && pc.Name < def.Name) {
			def = pc
		}
	}
	return def
}

// OutdatedByJob says whether a hub Workload was evicted because its job's
// pod sets changed after its dispatch (Evicted True, reason
// EvictedByJobChange) and its spec is not brought up to date yet (the
// condition's ObservedGeneration is the spec's generation): it is not
// dispatched as it is.
func OutdatedByJob(wl *strata.Workload) bool {
	c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadEvicted)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == strata.EvictedByJobChange && c.ObservedGeneration == wl.Generation
}
