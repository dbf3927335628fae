package jobs

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/workload"
)

// AddedByAdmissionAnnotation on a Job records, as JSON, what start added
// to its pod template for an admission, so that taking the admission back
// removes exactly that and keeps what the user wrote.
const AddedByAdmissionAnnotation = strata.AddedByAdmissionAnnotation

// addedByAdmission is what admitTemplate changed in a pod template. The
// labels and the scheduling gate are not recorded: Strata owns their names.
type addedByAdmission struct {
	// NodeSelector holds the node selector entries set from the flavor's
	// node labels.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// ReplacedNodeSelector holds the template's own values of the
	// NodeSelector keys it already had.
	ReplacedNodeSelector map[string]string `json:"replacedNodeSelector,omitempty"`
	// Tolerations are the flavor's tolerations the template did not have.
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// Labels and Annotations hold the entries set from AdmissionChecks'
	// podSetUpdates; ReplacedLabels and ReplacedAnnotations the
	// template's own values of the keys it already had.
	Labels              map[string]string `json:"labels,omitempty"`
	ReplacedLabels      map[string]string `json:"replacedLabels,omitempty"`
	Annotations         map[string]string `json:"annotations,omitempty"`
	ReplacedAnnotations map[string]string `json:"replacedAnnotations,omitempty"`
	// Admission identifies the admission the Job was started with (see
	// admissionID), so that a Job being stopped is not mistaken for one
	// the user suspended when its Workload is admitted again meanwhile.
	// Empty when unknown.
	Admission string `json:"admission,omitempty"`
	// Starting marks a start not finished: the admitted templates are
	// written (a kind whose children are made from its templates gets them
	// before it resumes, jobs.ChildSync), the Job is not unsuspended yet.
	// A retry finishes the start; without the mark the Job would read as
	// one the user suspended after its start.
	Starting bool `json:"starting,omitempty"`
	// More holds what was added to the kind's other pod templates (the
	// second and later, see jobs.Job.Templates); a batch/v1 Job has one.
	More []addedByAdmission `json:"more,omitempty"`
}

// recordOf is the record of what an admission added to each of a Job's
// pod templates, in order: the first inline, the others in More.
func recordOf(perTemplate []addedByAdmission) addedByAdmission {
	if len(perTemplate) == 0 {
		return addedByAdmission{}
	}
	rec := perTemplate[0]
	if len(perTemplate) > 1 {
		rec.More = perTemplate[1:]
	}
	return rec
}

// forTemplate is what the record says was added to pod template i.
func (a addedByAdmission) forTemplate(i int) addedByAdmission {
	if i == 0 {
		a.More, a.Admission, a.Starting = nil, "", false
		return a
	}
	if i-1 < len(a.More) {
		return a.More[i-1]
	}
	return addedByAdmission{}
}

// admissionID identifies the admission a Workload holds: its queue and
// when its Admitted condition last turned True. Hot swap changes an
// admission's topology assignment but not that; an eviction and a new
// admission do.
func admissionID(wl *strata.Workload) string {
	if wl.Status.Admission == nil {
		return ""
	}
	c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
	if c == nil || c.Status != metav1.ConditionTrue {
		return ""
	}
	return wl.Status.Admission.ClusterQueue + "@" + c.LastTransitionTime.UTC().Format(time.RFC3339)
}

// admitTemplate applies the admission of pod set podSet on flavor to a pod
// template: the flavor's node labels and tolerations, the labels that tie
// pods to Workload wl, and the topology scheduling gate when the pod set
// has a topology assignment. It returns what it changed.
func admitTemplate(tmpl *corev1.PodTemplateSpec, flavor *strata.ResourceFlavor, wl, podSet string, topology bool) addedByAdmission {
	var added addedByAdmission
	for k, v := range flavor.Spec.NodeLabels {
		old, had := tmpl.Spec.NodeSelector[k]
		if had && old == v {
			continue
		}
		if had {
			setKey(&added.ReplacedNodeSelector, k, old)
		}
		setKey(&added.NodeSelector, k, v)
		setKey(&tmpl.Spec.NodeSelector, k, v)
	}
	for _, t := range flavor.Spec.Tolerations {
		if !slices.ContainsFunc(tmpl.Spec.Tolerations, func(x corev1.Toleration) bool { return x.MatchToleration(&t) }) {
			tmpl.Spec.Tolerations = append(tmpl.Spec.Tolerations, t)
			added.Tolerations = append(added.Tolerations, t)
		}
	}
	setKey(&tmpl.Labels, strata.WorkloadLabel, wl)
	setKey(&tmpl.Labels, strata.PodSetLabel, podSet)
	if topology {
		setKey(&tmpl.Labels, strata.TASLabel, "true")
		if !slices.ContainsFunc(tmpl.Spec.SchedulingGates, workload.IsTopologyGate) {
			tmpl.Spec.SchedulingGates = append(tmpl.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: strata.TopologySchedulingGate})
		}
	}
	return added
}

// applyPodSetUpdates adds to a pod template what the AdmissionChecks of
// the admission ask for its pod set (their podSetUpdates: labels,
// annotations, node selector, tolerations), recording it in added so
// that taking the admission back removes it. A later check's value of a
// key wins.
func applyPodSetUpdates(tmpl *corev1.PodTemplateSpec, podSet string, states []strata.AdmissionCheckState, added *addedByAdmission) {
	set := func(m *map[string]string, rec, replaced *map[string]string, k, v string) {
		old, had := (*m)[k]
		if had && old == v {
			return
		}
		if _, ours := (*rec)[k]; had && !ours {
			setKey(replaced, k, old)
		}
		setKey(rec, k, v)
		setKey(m, k, v)
	}
	for _, st := range states {
		for _, u := range st.PodSetUpdates {
			if u.Name != podSet {
				continue
			}
			for k, v := range u.Labels {
				set(&tmpl.Labels, &added.Labels, &added.ReplacedLabels, k, v)
			}
			for k, v := range u.Annotations {
				set(&tmpl.Annotations, &added.Annotations, &added.ReplacedAnnotations, k, v)
			}
			for k, v := range u.NodeSelector {
				set(&tmpl.Spec.NodeSelector, &added.NodeSelector, &added.ReplacedNodeSelector, k, v)
			}
			for _, t := range u.Tolerations {
				if !slices.ContainsFunc(tmpl.Spec.Tolerations, func(x corev1.Toleration) bool { return equality.Semantic.DeepEqual(x, t) }) {
					tmpl.Spec.Tolerations = append(tmpl.Spec.Tolerations, t)
					added.Tolerations = append(added.Tolerations, t)
				}
			}
		}
	}
}

// restoreEntries removes from m the entries rec records (leaving those
// changed since), putting back the replaced values.
func restoreEntries(m map[string]string, rec, replaced map[string]string) map[string]string {
	for k, v := range rec {
		if m[k] != v {
			continue // changed since: the user's now
		}
		if old, ok := replaced[k]; ok {
			m[k] = old
		} else {
			delete(m, k)
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// restoreTemplate undoes admitTemplate and applyPodSetUpdates: it removes
// what added records — leaving entries the user has changed since — and
// Strata's labels and gate.
func restoreTemplate(tmpl *corev1.PodTemplateSpec, added addedByAdmission) {
	tmpl.Labels = restoreEntries(tmpl.Labels, added.Labels, added.ReplacedLabels)
	tmpl.Annotations = restoreEntries(tmpl.Annotations, added.Annotations, added.ReplacedAnnotations)
	for k, v := range added.NodeSelector {
		if tmpl.Spec.NodeSelector[k] != v {
			continue // changed since: the user's now
		}
		if old, ok := added.ReplacedNodeSelector[k]; ok {
			tmpl.Spec.NodeSelector[k] = old
		} else {
			delete(tmpl.Spec.NodeSelector, k)
		}
	}
	if len(tmpl.Spec.NodeSelector) == 0 {
		tmpl.Spec.NodeSelector = nil
	}
	for _, t := range added.Tolerations {
		if i := slices.IndexFunc(tmpl.Spec.Tolerations, func(x corev1.Toleration) bool { return equality.Semantic.DeepEqual(x, t) }); i >= 0 {
			tmpl.Spec.Tolerations = slices.Delete(tmpl.Spec.Tolerations, i, i+1)
		}
	}
	if len(tmpl.Spec.Tolerations) == 0 {
		tmpl.Spec.Tolerations = nil
	}
	tmpl.Spec.SchedulingGates = slices.DeleteFunc(tmpl.Spec.SchedulingGates, workload.IsTopologyGate)
	if len(tmpl.Spec.SchedulingGates) == 0 {
		tmpl.Spec.SchedulingGates = nil
	}
	for _, l := range []string{strata.WorkloadLabel, strata.PodSetLabel, strata.TASLabel, strata.OwnerUIDLabel} {
		delete(tmpl.Labels, l)
	}
}

// recordAdded stores added in the Job's AddedByAdmissionAnnotation.
func recordAdded(job jobs.Job, added addedByAdmission) error {
	data, err := json.Marshal(added)
	if err != nil {
		return fmt.Errorf("recording what the admission added to the Job: %w", err)
	}
	annotations := job.Object().GetAnnotations()
	setKey(&annotations, AddedByAdmissionAnnotation, string(data))
	job.Object().SetAnnotations(annotations)
	return nil
}

// recordedAdded reads the Job's AddedByAdmissionAnnotation. It reports
// false when the Job has none (it was started by an agent that did not
// record it) or when it cannot be read.
func recordedAdded(job jobs.Job) (addedByAdmission, bool, error) {
	var added addedByAdmission
	v, ok := job.Object().GetAnnotations()[AddedByAdmissionAnnotation]
	if !ok {
		return added, false, nil
	}
	if err := json.Unmarshal([]byte(v), &added); err != nil {
		return addedByAdmission{}, false, fmt.Errorf("annotation %s: %w", AddedByAdmissionAnnotation, err)
	}
	return added, true, nil
}

// setKey sets (*m)[k] = v, making the map if needed.
func setKey(m *map[string]string, k, v string) {
	if *m == nil {
		*m = map[string]string{}
	}
	(*m)[k] = v
}
