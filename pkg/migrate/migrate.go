// Package migrate turns Kueue's objects into the Strata objects that mean
// the same ("kubectl strata migrate"): Topologies, ResourceFlavors,
// ClusterQueues, LocalQueues and WorkloadPriorityClasses as they are (the
// names and shapes are Kueue's), and MultiKueue's clusters, configs and
// admission checks as WorkerClusters a hub ClusterQueue selects. What it
// cannot carry over it says, field by field, with the reason: nothing is
// dropped silently. It is plain Go over unstructured objects, so it reads
// every Kueue API version without Kueue's Go types.
package migrate

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs/kinds"
)

// KueueGroup is Kueue's API group.
const KueueGroup = "kueue.x-k8s.io"

// multiKueueController is the controllerName of MultiKueue's admission
// checks.
const multiKueueController = "kueue.x-k8s.io/multikueue"

// ConfigLabelPrefix prefixes the label a migrated WorkerCluster gets for
// each MultiKueueConfig that listed its MultiKueueCluster; a migrated hub
// ClusterQueue selects WorkerClusters by it.
const ConfigLabelPrefix = "multikueue-config.strata.dev/"

// Options say where the hub looks for what the WorkerClusters name.
type Options struct {
	// HubNamespace is the namespace of strata-hub, where WorkerClusters'
	// kubeconfig Secrets must be (MultiKueue's are in Kueue's namespace).
	HubNamespace string
	// ClusterProfileNamespace is the namespace of the ClusterProfiles
	// MultiKueueClusters name (Kueue's configuration gives it).
	ClusterProfileNamespace string
}

// Note is something not carried over, and why; or, with ToDo, something
// the user must do for what was carried over to work.
type Note struct {
	// Object is "Kind namespace/name" of the Kueue object.
	Object string `json:"object"`
	// Field is the field path, "" for the whole object.
	Field string `json:"field,omitempty"`
	Why   string `json:"why"`
	ToDo  bool   `json:"todo,omitempty"`
}

func (n Note) String() string {
	if n.Field == "" {
		return fmt.Sprintf("%s: %s", n.Object, n.Why)
	}
	return fmt.Sprintf("%s: %s: %s", n.Object, n.Field, n.Why)
}

// Result is the Strata objects, in a stable order (kind, then name), and
// the notes.
type Result struct {
	Objects []client.Object
	Notes   []Note
}

// Convert migrates the Kueue objects. Objects of other groups are noted
// and skipped.
func Convert(objs []*unstructured.Unstructured, opts Options) Result {
	c := &converter{opts: opts, configs: map[string][]string{}, checks: map[string]string{}, seenChecks: map[string]bool{}, configLabels: map[string]string{}}
	// MultiKueue's objects first: the ClusterQueues' admission checks
	// resolve through them.
	for _, o := range objs {
		if o.GroupVersionKind().Group != KueueGroup {
			continue
		}
		switch o.GetKind() {
		case "MultiKueueConfig":
			c.config(o)
		case "AdmissionCheck":
			c.admissionCheck(o)
		}
	}
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		if gvk.Group != KueueGroup {
			if !c.kueueJob(o) {
				c.note(o, "", fmt.Sprintf("not a Kueue object (%s): migrate reads %s objects only", gvk.GroupVersion(), KueueGroup))
			}
			continue
		}
		switch o.GetKind() {
		case "Topology":
			c.topology(o)
		case "ResourceFlavor":
			c.resourceFlavor(o)
		case "ClusterQueue":
			c.clusterQueue(o)
		case "LocalQueue":
			c.localQueue(o)
		case "WorkloadPriorityClass":
			c.priorityClass(o)
		case "MultiKueueCluster":
			c.multiKueueCluster(o)
		case "MultiKueueConfig", "AdmissionCheck":
			// Carried by the WorkerClusters and ClusterQueues.
		case "Cohort":
			c.cohort(o)
		case "ProvisioningRequestConfig":
			c.provisioningRequestConfig(o)
		case "Workload":
			c.note(o, "", "Workloads are not migrated: Strata creates one for each job; run the job through Strata's queue label instead")
		default:
			c.note(o, "", fmt.Sprintf("Strata has no %s", o.GetKind()))
		}
	}
	sort.SliceStable(c.out, func(i, j int) bool {
		a, b := c.out[i], c.out[j]
		if ka, kb := kindOrder(a), kindOrder(b); ka != kb {
			return ka < kb
		}
		return a.GetNamespace()+"/"+a.GetName() < b.GetNamespace()+"/"+b.GetName()
	})
	return Result{Objects: c.out, Notes: c.notes}
}

// kindOrder orders the output so that it applies in one pass: what others
// name comes first.
func kindOrder(o client.Object) int {
	switch o.(type) {
	case *strata.Topology:
		return 0
	case *strata.ResourceFlavor:
		return 1
	case *strata.WorkloadPriorityClass:
		return 2
	case *strata.Cohort:
		return 3
	case *strata.ClusterQueue:
		return 4
	case *strata.LocalQueue:
		return 5
	}
	return 6
}

type converter struct {
	opts  Options
	out   []client.Object
	notes []Note
	// configs: MultiKueueConfig name -> its clusters; checks: MultiKueue
	// AdmissionCheck name -> its MultiKueueConfig.
	configs map[string][]string
	checks  map[string]string
	// seenChecks are the AdmissionChecks of the input, of any controller.
	seenChecks map[string]bool
	// configLabels: MultiKueueConfig name -> the label key that stands
	// for it (shortened when the name is no valid label name).
	configLabels map[string]string
}

func objectName(o *unstructured.Unstructured) string {
	if o.GetNamespace() != "" {
		return fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
	}
	return fmt.Sprintf("%s %s", o.GetKind(), o.GetName())
}

func (c *converter) note(o *unstructured.Unstructured, field, why string) {
	c.notes = append(c.notes, Note{Object: objectName(o), Field: field, Why: why})
}

func (c *converter) todo(o *unstructured.Unstructured, field, what string) {
	c.notes = append(c.notes, Note{Object: objectName(o), Field: field, Why: what, ToDo: true})
}

// meta is the Strata object's metadata: name, namespace, labels and
// annotations (kubectl's last-applied configuration and Kueue's own
// annotations left out, with a note).
func (c *converter) meta(o *unstructured.Unstructured) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: o.GetName(), Namespace: o.GetNamespace(), Labels: o.GetLabels()}
	for k, v := range o.GetAnnotations() {
		switch {
		case k == "kubectl.kubernetes.io/last-applied-configuration":
			continue
		case strings.HasPrefix(k, KueueGroup+"/"):
			c.note(o, "metadata.annotations."+k, "Kueue's own annotation; Strata does not read it")
			continue
		}
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[k] = v
	}
	return m
}

// spec returns a copy of the object's spec; fields are taken out of it as
// they are carried over, and what is left is noted (see leftovers).
func spec(o *unstructured.Unstructured) map[string]any {
	s, _, _ := unstructured.NestedMap(o.Object, "spec")
	if s == nil {
		s = map[string]any{}
	}
	return s
}

// take removes a field from m and returns it.
func take(m map[string]any, key string) (any, bool) {
	v, ok := m[key]
	delete(m, key)
	return v, ok
}

// decode converts v into out strictly: a field the Strata type does not
// have is noted under path and the rest decoded.
func (c *converter) decode(o *unstructured.Unstructured, path string, v any, out any) {
	data, err := json.Marshal(v)
	if err != nil {
		c.note(o, path, "cannot be read: "+err.Error())
		return
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(out); err == nil {
		return
	}
	if err := json.Unmarshal(data, out); err != nil {
		c.note(o, path, "cannot be read: "+err.Error())
		return
	}
	// Every field the Strata type has no place for, not only the first
	// the strict decoder stops at.
	back, err := json.Marshal(out)
	var decoded any
	if err == nil {
		err = json.Unmarshal(back, &decoded)
	}
	var in any
	if err == nil {
		err = json.Unmarshal(data, &in)
	}
	if err != nil {
		c.note(o, path, "partly carried over: "+err.Error())
		return
	}
	for _, f := range unknownFields(in, decoded, path) {
		c.note(o, f, "Strata has no such field: not carried over")
	}
}

// unknownFields lists the paths, below path, of what in has and out (in
// decoded into a Strata type, and encoded again) does not: the fields the
// type has no place for. A field of in whose value is empty (which out
// may leave out) is not listed.
func unknownFields(in, out any, path string) []string {
	var found []string
	switch v := in.(type) {
	case map[string]any:
		om, _ := out.(map[string]any)
		for _, k := range sortedKeys(v) {
			o, ok := om[k]
			switch {
			case !ok && !emptyValue(v[k]):
				found = append(found, path+"."+k)
			case ok:
				found = append(found, unknownFields(v[k], o, path+"."+k)...)
			}
		}
	case []any:
		ol, _ := out.([]any)
		for i := range min(len(v), len(ol)) {
			found = append(found, unknownFields(v[i], ol[i], fmt.Sprintf("%s[%d]", path, i))...)
		}
	}
	return found
}

// emptyValue says whether a JSON value is one an encoder may leave out.
func emptyValue(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case float64:
		return v == 0
	case bool:
		return !v
	case map[string]any:
		return len(v) == 0
	case []any:
		return len(v) == 0
	}
	return false
}

// leftovers notes the spec fields nothing carried over, with the reason
// when it is known.
func (c *converter) leftovers(o *unstructured.Unstructured, s map[string]any, known map[string]string) {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		why, ok := known[k]
		if !ok {
			why = "Strata has no such field"
		}
		c.note(o, "spec."+k, why)
	}
}

func (c *converter) topology(o *unstructured.Unstructured) {
	s := spec(o)
	t := &strata.Topology{TypeMeta: typeMeta("Topology"), ObjectMeta: c.meta(o)}
	if v, ok := take(s, "levels"); ok {
		c.decode(o, "spec.levels", v, &t.Spec.Levels)
	}
	c.leftovers(o, s, nil)
	c.out = append(c.out, t)
}

func (c *converter) resourceFlavor(o *unstructured.Unstructured) {
	s := spec(o)
	f := &strata.ResourceFlavor{TypeMeta: typeMeta("ResourceFlavor"), ObjectMeta: c.meta(o)}
	c.decode(o, "spec", pick(s, "nodeLabels", "nodeTaints", "tolerations", "topologyName"), &f.Spec)
	switch {
	case f.Spec.TopologyName == nil:
		c.note(o, "spec.topologyName", "not set: Strata admits only on topology-aware flavors, so ClusterQueues cannot admit on this one until it names a Topology")
	case len(f.Spec.NodeLabels) == 0:
		c.todo(o, "spec.nodeLabels", "Strata needs nodeLabels beside topologyName (they select the topology's nodes): add the labels of this flavor's nodes, or the API server refuses the flavor")
	}
	c.leftovers(o, s, nil)
	c.out = append(c.out, f)
}

// clusterQueueOnly are ClusterQueue fields Strata does not have, and why.
var clusterQueueOnly = map[string]string{
	"admissionChecks":         "Strata has no admission checks",
	"admissionChecksStrategy": "Strata has no admission checks",
}

// dropDefault removes a field set to Kueue's default, which means what
// Strata does without it.
func dropDefault(s map[string]any, key string, def any) {
	if s[key] == def {
		delete(s, key)
	}
}

func (c *converter) clusterQueue(o *unstructured.Unstructured) {
	s := spec(o)
	dropDefault(s, "stopPolicy", "None")
	cq := &strata.ClusterQueue{TypeMeta: typeMeta("ClusterQueue"), ObjectMeta: c.meta(o)}
	// Kueue v1beta2 names the cohort cohortName.
	if v, ok := take(s, "cohortName"); ok {
		s["cohort"] = v
	}
	if ff, ok := s["flavorFungibility"].(map[string]any); ok {
		ff = fungibility(ff)
		// Kueue v1beta2: which of borrowing and preempting a flavor walk
		// prefers. Strata's walk prefers borrowing (Kueue's default).
		if pref, ok := take(ff, "preference"); ok && pref != "BorrowingOverPreemption" {
			c.note(o, "spec.flavorFungibility.preference", fmt.Sprintf("%v not carried over: Strata takes a flavor where the workload fits by borrowing before one where it must preempt (Kueue's BorrowingOverPreemption), so it may take another flavor than Kueue did", pref))
		}
		s["flavorFungibility"] = ff
	}
	// MultiKueue: the queue's admission checks name the clusters its
	// workloads may go to; on a Strata hub the queue selects them.
	var checks []string
	onFlavors := map[string][]string{}
	if v, ok := s["admissionChecks"].([]any); ok {
		for _, n := range v {
			if name, ok := n.(string); ok {
				checks = append(checks, name)
			}
		}
	}
	if v, ok := s["admissionChecksStrategy"].(map[string]any); ok {
		if list, ok := v["admissionChecks"].([]any); ok {
			for _, r := range list {
				if m, ok := r.(map[string]any); ok {
					name, _ := m["name"].(string)
					if name != "" {
						checks = append(checks, name)
					}
					if fl, ok := m["onFlavors"].([]any); ok && name != "" {
						for _, f := range fl {
							if f, ok := f.(string); ok {
								onFlavors[name] = append(onFlavors[name], f)
							}
						}
					}
				}
			}
		}
	}
	var others []string
	for _, name := range checks {
		config, mk := c.checks[name]
		switch {
		case !mk && !c.seenChecks[name]:
			// Kueue's queue is inactive without it (AdmissionCheckNotFound);
			// whether it is MultiKueue's decides which workers the hub's
			// queue may use.
			c.todo(o, "spec.admissionChecks", fmt.Sprintf("AdmissionCheck %s is not in the input: pass it (and its MultiKueueConfig) to migrate; "+
				"if it is MultiKueue's, its clusters become the queue's clusterSelector, and without one the hub queue dispatches to every worker", name))
		case !mk:
			others = append(others, name)
		case cq.Spec.ClusterSelector != nil:
			c.note(o, "spec.admissionChecks", fmt.Sprintf("MultiKueue check %s not carried over: the queue already selects the clusters of another MultiKueue check", name))
		default:
			cq.Spec.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{c.configLabel(config): "true"}}
		}
	}
	delete(s, "admissionChecks")
	delete(s, "admissionChecksStrategy")
	if len(others) > 0 {
		// The other checks carry over as they are: a worker's agent runs
		// them, and a hub waits for them before it dispatches.
		strategy := false
		for _, name := range others {
			strategy = strategy || len(onFlavors[name]) > 0
		}
		if strategy {
			cq.Spec.AdmissionChecksStrategy = &strata.AdmissionChecksStrategy{}
			for _, name := range others {
				cq.Spec.AdmissionChecksStrategy.AdmissionChecks = append(cq.Spec.AdmissionChecksStrategy.AdmissionChecks,
					strata.AdmissionCheckStrategyRule{Name: name, OnFlavors: onFlavors[name]})
			}
		} else {
			cq.Spec.AdmissionChecks = others
		}
		c.note(o, "spec.admissionChecks", fmt.Sprintf("%s carried over: on a worker the agent reserves quota and admits once each check is Ready (on a hub, before it dispatches)", strings.Join(others, ", ")))
	}
	c.decode(o, "spec", pick(s, "namespaceSelector", "resourceGroups", "cohort", "queueingStrategy", "preemption", "flavorFungibility", "stopPolicy", "fairSharing", "admissionScope"), &cq.Spec)
	c.noteFairSharing(o, cq.Spec.FairSharing)
	if sc := cq.Spec.AdmissionScope; sc != nil && sc.AdmissionMode == strata.UsageBasedAdmissionFairSharing {
		c.note(o, "spec.admissionScope", "carried over: the queue orders its workloads by their LocalQueues' usage where the agent's configuration sets admissionFairSharing (Kueue's Configuration admissionFairSharing; the strata-agent chart's config.admissionFairSharing)")
	}
	if strata.Stopped(cq.Spec.StopPolicy) {
		c.note(o, "spec.stopPolicy", fmt.Sprintf("carried over: the Strata queue is stopped too (%s); set it to None when it should admit", *cq.Spec.StopPolicy))
	}
	if len(cq.Spec.ResourceGroups) == 0 {
		why := "Kueue allows a ClusterQueue without quota; Strata needs resourceGroups: give it the quota it should have, or the API server refuses it"
		if cq.Spec.Cohort != "" {
			why += fmt.Sprintf(" (a nominalQuota of 0 for each resource on each flavor it uses borrows all of it from cohort %s, as Kueue does)", cq.Spec.Cohort)
		}
		c.todo(o, "spec.resourceGroups", why)
	}
	if len(cq.Spec.ResourceGroups) > 1 {
		c.todo(o, "spec.resourceGroups", fmt.Sprintf("%d resource groups: Strata admits a pod set on one flavor for all its resources, where Kueue picks a flavor per group, so a pod set asking for resources of two groups (cpu of one flavor and GPUs of another, say) is Inadmissible, and a group of pods alone is not enforced; give every flavor quota for all the resources its workloads ask for, in one group, or keep such workloads on Kueue",
			len(cq.Spec.ResourceGroups)))
	}
	c.checkLimits(o, cq.Spec.ResourceGroups)
	c.leftovers(o, s, clusterQueueOnly)
	c.out = append(c.out, cq)
}

// noteFairSharing says that a fair-sharing weight carried over counts only
// where the agent's configuration turns fair sharing on, as in Kueue.
func (c *converter) noteFairSharing(o *unstructured.Unstructured, fs *strata.FairSharing) {
	if fs != nil && fs.Weight != nil {
		c.note(o, "spec.fairSharing", fmt.Sprintf("weight %s carried over: it counts where the agent's configuration sets fairSharing (Kueue's Configuration fairSharing; the strata-agent chart's config.fairSharing)", fs.Weight))
	}
}

// maxListItems is the most items Strata's ClusterQueue lists hold
// (Kueue's hold 64).
const maxListItems = 16

// checkLimits notes the lists of a ClusterQueue's (or a Cohort's)
// resource groups longer than Strata's API allows: the API server would
// refuse it.
func (c *converter) checkLimits(o *unstructured.Unstructured, groups []strata.ResourceGroup) {
	over := func(field string, n int) {
		if n > maxListItems {
			c.todo(o, field, fmt.Sprintf("%d items, more than the %d Strata allows: split the queue or trim the list, or the API server refuses it", n, maxListItems))
		}
	}
	over("spec.resourceGroups", len(groups))
	for i, g := range groups {
		over(fmt.Sprintf("spec.resourceGroups[%d].coveredResources", i), len(g.CoveredResources))
		over(fmt.Sprintf("spec.resourceGroups[%d].flavors", i), len(g.Flavors))
		for j, f := range g.Flavors {
			over(fmt.Sprintf("spec.resourceGroups[%d].flavors[%d].resources", i, j), len(f.Resources))
		}
	}
}

// cohort carries a Kueue Cohort over: its parent (v1beta2's parentName;
// v1alpha1 and v1beta1 say parent), its quota and its fair-sharing weight.
func (c *converter) cohort(o *unstructured.Unstructured) {
	s := spec(o)
	co := &strata.Cohort{TypeMeta: typeMeta("Cohort"), ObjectMeta: c.meta(o)}
	if v, ok := take(s, "parent"); ok {
		s["parentName"] = v
	}
	c.decode(o, "spec", pick(s, "parentName", "resourceGroups", "fairSharing"), &co.Spec)
	c.noteFairSharing(o, co.Spec.FairSharing)
	c.checkLimits(o, co.Spec.ResourceGroups)
	c.leftovers(o, s, nil)
	c.out = append(c.out, co)
}

// kueueJob notes what a job that Kueue queued needs to run through
// Strata: its queue label, and the Kueue labels and annotations Strata
// does not read. It says whether the object had any.
func (c *converter) kueueJob(o *unstructured.Unstructured) bool {
	found := false
	runs := runsKind(o)
	for _, k := range sortedKeys(o.GetLabels()) {
		if !strings.HasPrefix(k, KueueGroup+"/") {
			continue
		}
		found = true
		switch {
		case k == KueueGroup+"/queue-name" && !runs:
			gvk := o.GroupVersionKind()
			c.note(o, "metadata.labels."+k, fmt.Sprintf("Strata does not run %s (%s): keep it on Kueue (Strata runs batch/v1 Jobs, jobset.x-k8s.io/v1alpha2 JobSets, kubeflow.org/v2beta1 MPIJobs and leaderworkerset.x-k8s.io/v1 LeaderWorkerSets)", gvk.Kind, gvk.GroupVersion()))
		case k == KueueGroup+"/queue-name" && o.GetLabels()[strata.QueueNameLabel] != "":
			c.todo(o, "metadata.labels."+k, fmt.Sprintf("remove it: the job has %s too, and Kueue, while it runs beside Strata, would manage it as well", strata.QueueNameLabel))
		case k == KueueGroup+"/queue-name":
			c.todo(o, "metadata.labels."+k, fmt.Sprintf("replace it with %s: %s (Strata reads its own label; a job with both would be managed by Kueue and Strata; migrate converts Kueue's objects, not jobs)",
				strata.QueueNameLabel, o.GetLabels()[k]))
		case k == strata.KueuePriorityClassLabel, k == strata.KueueMaxExecTimeSecondsLabel && runs:
			// Strata reads it as Kueue does.
		default:
			c.note(o, "metadata.labels."+k, "Kueue's label; Strata does not read it")
		}
	}
	for _, k := range sortedKeys(o.GetAnnotations()) {
		if !strings.HasPrefix(k, KueueGroup+"/") {
			continue
		}
		found = true
		if k == strata.KueuePrefix+"tas-unhealthy-nodes-eviction-threshold" && runs {
			continue // Strata reads it as Kueue does
		}
		if (k == strata.KueuePrefix+"job-min-parallelism" || k == strata.KueuePrefix+"job-completions-equal-parallelism") && runs && o.GetKind() == "Job" {
			continue // partial admission: Strata reads them as Kueue does
		}
		if k == KueueGroup+"/queue-name" && runs && o.GetLabels()[strata.QueueNameLabel] == "" {
			// Kueue's queue annotation, read by its earlier versions.
			c.todo(o, "metadata.annotations."+k, fmt.Sprintf("label the job %s: %s instead (Strata reads its own label; migrate converts Kueue's objects, not jobs)",
				strata.QueueNameLabel, o.GetAnnotations()[k]))
			continue
		}
		c.note(o, "metadata.annotations."+k, "Kueue's annotation; Strata does not read it")
	}
	return found
}

// runsKind says whether Strata runs jobs of o's kind and API version (a
// training-operator kubeflow.org/v1 MPIJob is not the MPI operator's
// v2beta1 that Strata watches).
func runsKind(o *unstructured.Unstructured) bool {
	gvk := o.GroupVersionKind()
	for _, r := range kinds.Registered {
		if r.Kind.GroupVersionKind() == gvk {
			return true
		}
	}
	return false
}

// fungibility maps Kueue v1beta2's flavorFungibility values to v1beta1's,
// which Strata uses.
func fungibility(ff map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range ff {
		out[k] = v
	}
	if out["whenCanBorrow"] == "MayStopSearch" {
		out["whenCanBorrow"] = string(strata.FungibilityBorrow)
	}
	if out["whenCanPreempt"] == "MayStopSearch" {
		out["whenCanPreempt"] = string(strata.FungibilityPreempt)
	}
	return out
}

func (c *converter) localQueue(o *unstructured.Unstructured) {
	s := spec(o)
	dropDefault(s, "stopPolicy", "None")
	lq := &strata.LocalQueue{TypeMeta: typeMeta("LocalQueue"), ObjectMeta: c.meta(o)}
	c.decode(o, "spec", pick(s, "clusterQueue", "stopPolicy", "fairSharing"), &lq.Spec)
	if fs := lq.Spec.FairSharing; fs != nil && fs.Weight != nil {
		c.note(o, "spec.fairSharing", fmt.Sprintf("weight %s carried over: it counts under admission fair sharing (its ClusterQueue's admissionScope, and admissionFairSharing in the agent's configuration)", fs.Weight))
	}
	if lq.Spec.ClusterQueue == "" {
		c.todo(o, "spec.clusterQueue", "not set (Kueue allows it): name the ClusterQueue this LocalQueue leads to, or the API server refuses it")
	}
	if strata.Stopped(lq.Spec.StopPolicy) {
		c.note(o, "spec.stopPolicy", fmt.Sprintf("carried over: the Strata queue is stopped too (%s); set it to None when it should admit", *lq.Spec.StopPolicy))
	}
	if lq.Name == "default" {
		c.note(o, "", fmt.Sprintf("the namespace's default queue, as in Kueue (LocalQueue defaulting): the charts' admission policies label a job of namespace %s created without a queue label %s: default", lq.Namespace, strata.QueueNameLabel))
	}
	c.leftovers(o, s, nil)
	c.out = append(c.out, lq)
}

func (c *converter) priorityClass(o *unstructured.Unstructured) {
	wpc := &strata.WorkloadPriorityClass{TypeMeta: typeMeta("WorkloadPriorityClass"), ObjectMeta: c.meta(o)}
	rest := map[string]any{}
	for k, v := range o.Object {
		switch k {
		case "apiVersion", "kind", "metadata":
		case "value", "description":
		default:
			rest[k] = v
		}
	}
	c.decode(o, "", pick(o.DeepCopy().Object, "value", "description"), wpc)
	for k := range rest {
		c.note(o, k, "Strata has no such field")
	}
	if wpc.Name == "default" {
		c.note(o, "", fmt.Sprintf("the default class, as in Kueue (WorkloadPriorityClass defaulting): the charts' admission policies label a job created without a priority-class label %s: default", strata.PriorityClassLabel))
	}
	c.out = append(c.out, wpc)
}

func (c *converter) config(o *unstructured.Unstructured) {
	s := spec(o)
	clusters, _, _ := unstructured.NestedStringSlice(o.Object, "spec", "clusters")
	delete(s, "clusters")
	c.configs[o.GetName()] = clusters
	key := ConfigLabelPrefix + o.GetName()
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		sum := sha256.Sum256([]byte(o.GetName()))
		short := strings.TrimRight(o.GetName()[:min(len(o.GetName()), 54)], "-.") + "-" + hex.EncodeToString(sum[:4])
		key = ConfigLabelPrefix + short
		c.note(o, "metadata.name", fmt.Sprintf("not a valid label name (%s): its WorkerClusters and ClusterQueues use label %s instead", strings.Join(errs, "; "), key))
	}
	c.configLabels[o.GetName()] = key
	if len(clusters) > 1 {
		c.note(o, "spec.clusters", "their order is not kept: a Strata hub places each job on the worker where it fits best, not on the first listed")
	}
	c.leftovers(o, s, map[string]string{"quotaManagement": "a Strata hub keeps the quota itself (its ClusterQueues); the workers' quotas are their own"})
}

// configLabel is the label key that stands for a MultiKueueConfig.
func (c *converter) configLabel(config string) string {
	if k, ok := c.configLabels[config]; ok {
		return k
	}
	return ConfigLabelPrefix + config
}

func (c *converter) admissionCheck(o *unstructured.Unstructured) {
	c.seenChecks[o.GetName()] = true
	controller, _, _ := unstructured.NestedString(o.Object, "spec", "controllerName")
	if controller != multiKueueController {
		c.otherCheck(o, controller)
		return
	}
	kind, _, _ := unstructured.NestedString(o.Object, "spec", "parameters", "kind")
	name, _, _ := unstructured.NestedString(o.Object, "spec", "parameters", "name")
	if kind != "MultiKueueConfig" || name == "" {
		c.note(o, "spec.parameters", "a MultiKueue check without a MultiKueueConfig: its ClusterQueues select no clusters")
		return
	}
	c.checks[o.GetName()] = name
}

// otherCheck carries over an AdmissionCheck that is not MultiKueue's: the
// same controller name and parameters. Its controller must set its states
// on Strata's Workloads and mark it Active; Kueue's own ProvisioningRequest
// controller is not part of Strata.
func (c *converter) otherCheck(o *unstructured.Unstructured, controller string) {
	ac := &strata.AdmissionCheck{TypeMeta: typeMeta("AdmissionCheck"), ObjectMeta: c.meta(o)}
	ac.Namespace = ""
	ac.Spec.ControllerName = controller
	if p, ok, _ := unstructured.NestedMap(o.Object, "spec", "parameters"); ok {
		ref := &strata.AdmissionCheckParametersReference{}
		ref.APIGroup, _ = p["apiGroup"].(string)
		ref.Kind, _ = p["kind"].(string)
		ref.Name, _ = p["name"].(string)
		ac.Spec.Parameters = ref
	}
	if v, ok, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "retryDelayMinutes"); ok && v != nil {
		c.note(o, "spec.retryDelayMinutes", "not carried over (deprecated in Kueue): a check that asks to retry queues the workload again at once")
	}
	if controller == provisioningController {
		if p := ac.Spec.Parameters; p != nil && p.APIGroup == KueueGroup && p.Kind == "ProvisioningRequestConfig" {
			p.APIGroup = strata.GroupVersion.Group
		}
		c.note(o, "spec.controllerName", "Kueue's ProvisioningRequest check: the agent runs it (with KEP-2724's delayed topology assignment); its ProvisioningRequestConfig must be migrated too, and the worker must serve the cluster autoscaler's ProvisioningRequest CRD")
	} else {
		c.note(o, "spec.controllerName", fmt.Sprintf("carried over: the controller %s must set the check's states on strata.dev Workloads (status.admissionChecks) and mark it Active", controller))
	}
	c.out = append(c.out, ac)
}

// provisioningRequestConfig becomes Strata's kind of the same name and
// fields.
func (c *converter) provisioningRequestConfig(o *unstructured.Unstructured) {
	cfg := &strata.ProvisioningRequestConfig{TypeMeta: typeMeta("ProvisioningRequestConfig"), ObjectMeta: c.meta(o)}
	cfg.Namespace = ""
	s := spec(o)
	cfg.Spec.ProvisioningClassName, _ = s["provisioningClassName"].(string)
	if m, ok, _ := unstructured.NestedStringMap(o.Object, "spec", "parameters"); ok {
		cfg.Spec.Parameters = m
	}
	if l, ok, _ := unstructured.NestedStringSlice(o.Object, "spec", "managedResources"); ok {
		for _, r := range l {
			cfg.Spec.ManagedResources = append(cfg.Spec.ManagedResources, corev1.ResourceName(r))
		}
	}
	if rs, ok, _ := unstructured.NestedMap(o.Object, "spec", "retryStrategy"); ok {
		st := &strata.ProvisioningRequestRetryStrategy{}
		num := func(k string) *int32 {
			switch v := rs[k].(type) {
			case int64:
				n := int32(v)
				return &n
			case float64:
				n := int32(v)
				return &n
			}
			return nil
		}
		st.BackoffLimitCount, st.BackoffBaseSeconds, st.BackoffMaxSeconds = num("backoffLimitCount"), num("backoffBaseSeconds"), num("backoffMaxSeconds")
		cfg.Spec.RetryStrategy = st
	}
	if l, ok, _ := unstructured.NestedSlice(o.Object, "spec", "podSetUpdates", "nodeSelector"); ok {
		u := &strata.ProvisioningRequestPodSetUpdates{}
		for _, item := range l {
			m, _ := item.(map[string]any)
			key, _ := m["key"].(string)
			from, _ := m["valueFromProvisioningClassDetail"].(string)
			u.NodeSelector = append(u.NodeSelector, strata.ProvisioningRequestPodSetUpdatesNodeSelector{Key: key, ValueFromProvisioningClassDetail: from})
		}
		cfg.Spec.PodSetUpdates = u
	}
	if v, ok := s["podSetMergePolicy"].(string); ok && v != "" {
		p := strata.PodSetMergePolicy(v)
		cfg.Spec.PodSetMergePolicy = &p
	}
	c.out = append(c.out, cfg)
}

// provisioningController is the controller name of Kueue's
// ProvisioningRequest admission checks.
const provisioningController = "kueue.x-k8s.io/provisioning-request"

// multiKueueCluster becomes a WorkerCluster with the same credentials,
// labelled for every MultiKueueConfig that lists it.
func (c *converter) multiKueueCluster(o *unstructured.Unstructured) {
	s := spec(o)
	wc := &strata.WorkerCluster{TypeMeta: typeMeta("WorkerCluster"), ObjectMeta: c.meta(o)}
	wc.Namespace = ""
	for _, config := range sortedKeys(c.configs) {
		if slices.Contains(c.configs[config], o.GetName()) {
			if wc.Labels == nil {
				wc.Labels = map[string]string{}
			}
			wc.Labels[c.configLabel(config)] = "true"
		}
	}
	// v1beta2 puts the source under clusterSource.
	if src, ok := take(s, "clusterSource"); ok {
		if m, ok := src.(map[string]any); ok {
			for k, v := range m {
				s[k] = v
			}
		}
	}
	kubeConfig, hasKC := take(s, "kubeConfig")
	profile, hasProfile := take(s, "clusterProfileRef")
	switch {
	case hasProfile && profile != nil:
		name, _, _ := unstructured.NestedString(map[string]any{"p": profile}, "p", "name")
		wc.Spec.ClusterProfileRef = &strata.ObjectReference{Namespace: c.opts.ClusterProfileNamespace, Name: name}
		if hasKC && kubeConfig != nil {
			c.note(o, "spec.kubeConfig", "the ClusterProfile is used; a WorkerCluster has one source")
		}
	case hasKC:
		m, _ := kubeConfig.(map[string]any)
		location, _ := m["location"].(string)
		locationType, _ := m["locationType"].(string)
		if locationType == "Path" {
			c.todo(o, "spec.kubeConfig", fmt.Sprintf("a kubeconfig file on Kueue's disk (%s) cannot be carried over: put it in a Secret in namespace %s (key kubeconfig) and set spec.kubeConfigSecretRef, or the API server refuses the WorkerCluster", location, c.opts.HubNamespace))
			break
		}
		wc.Spec.KubeConfigSecretRef = &strata.SecretKeyReference{Namespace: c.opts.HubNamespace, Name: location, Key: "kubeconfig"}
		c.todo(o, "spec.kubeConfig", fmt.Sprintf("copy Secret %s (key kubeconfig) from Kueue's namespace to %s, where strata-hub reads it; the hub's identity on the worker needs the permissions in docs/admin-guide.md, which MultiKueue's does not all have", location, c.opts.HubNamespace))
	default:
		c.todo(o, "spec", "no kubeConfig or clusterProfileRef: give the WorkerCluster a source (kubeConfigSecretRef, clusterProfileRef or managedClusterName), or the API server refuses it")
	}
	c.leftovers(o, s, nil)
	c.out = append(c.out, wc)
}

// pick returns the given keys of m that are set, and removes them from m.
func pick(m map[string]any, keys ...string) map[string]any {
	out := map[string]any{}
	for _, k := range keys {
		if v, ok := take(m, k); ok {
			out[k] = v
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func typeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: strata.GroupVersion.String(), Kind: kind}
}
