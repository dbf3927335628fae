// Package provisioning is the agent's ProvisioningRequest admission check
// (Kueue's, controllerName kueue.x-k8s.io/provisioning-request): for each
// workload whose quota is reserved on a flavor the check applies to, it
// asks the cluster autoscaler for the nodes its pods need with an
// autoscaling.x-k8s.io/v1 ProvisioningRequest (and a PodTemplate per pod
// set), and sets the check's state from the request's conditions:
// Provisioned makes it Ready (the pods then consume the request:
// podSetUpdates), Failed (or BookingExpired before the workload was
// admitted) Retry with a backoff, or Rejected once the retries are
// spent. The scheduler assigns the topology once the check is Ready, on
// the nodes provisioned meanwhile (KEP-2724's second pass).
package provisioning

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/workload"
)

// The annotations a provisioned pod carries to consume its request (the
// cluster autoscaler's).
const (
	ConsumesAnnotation = "autoscaling.x-k8s.io/consume-provisioning-request"
	ClassAnnotation    = "autoscaling.x-k8s.io/provisioning-class-name"
)

// The ProvisioningRequest's conditions (the cluster autoscaler's).
const (
	condProvisioned     = "Provisioned"
	condFailed          = "Failed"
	condBookingExpired  = "BookingExpired"
	condCapacityRevoked = "CapacityRevoked"
	condAccepted        = "Accepted"
)

// GVK is the cluster autoscaler's ProvisioningRequest.
var GVK = schema.GroupVersionKind{Group: "autoscaling.x-k8s.io", Version: "v1", Kind: "ProvisioningRequest"}

// Served says whether the cluster serves ProvisioningRequests.
func Served(mapper meta.RESTMapper) bool {
	_, err := mapper.RESTMapping(GVK.GroupKind(), GVK.Version)
	return err == nil
}

// Defaults of a ProvisioningRequestConfig's retryStrategy (Kueue's).
const (
	defaultBackoffLimit = 3
	defaultBackoffBase  = 60
	defaultBackoffMax   = 1800
)

// Reconciler runs the check for Workloads.
type Reconciler struct {
	client   client.Client
	clock    clock.Clock
	recorder events.EventRecorder
	served   bool
}

// NewReconciler returns a Reconciler writing through c; served says
// whether the cluster serves ProvisioningRequests (see Served).
func NewReconciler(c client.Client, clk clock.Clock, recorder events.EventRecorder, served bool) *Reconciler {
	return &Reconciler{client: c, clock: clk, recorder: recorder, served: served}
}

// SetupWithManager watches the Workloads with check states and, when the
// cluster serves them, the ProvisioningRequests they own; and the
// AdmissionChecks of this controller with their configs, to mark them
// Active.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	withChecks := predicate.NewPredicateFuncs(func(o client.Object) bool {
		wl, ok := o.(*strata.Workload)
		return ok && len(wl.Status.AdmissionChecks) > 0 && wl.Status.Admission != nil
	})
	b := ctrl.NewControllerManagedBy(mgr).
		Named("provisioning").
		For(&strata.Workload{}, builder.WithPredicates(withChecks))
	if r.served {
		pr := &unstructured.Unstructured{}
		pr.SetGroupVersionKind(GVK)
		b = b.Owns(pr)
	}
	if err := b.Complete(r); err != nil {
		return err
	}
	checks := &checkReconciler{client: r.client, clock: r.clock, served: r.served}
	return ctrl.NewControllerManagedBy(mgr).
		Named("provisioning-checks").
		For(&strata.AdmissionCheck{}).
		Watches(&strata.ProvisioningRequestConfig{}, handler.EnqueueRequestsFromMapFunc(checks.usingConfig)).
		Complete(checks)
}

// Reconcile sets the state of each ProvisioningRequest check of one
// reserved workload.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	wl := &strata.Workload{}
	if err := r.client.Get(ctx, req.NamespacedName, wl); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if wl.Status.Admission == nil || meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished) || !r.served {
		return ctrl.Result{}, nil
	}
	cq := &strata.ClusterQueue{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: wl.Status.Admission.ClusterQueue}, cq); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var after time.Duration
	changed := false
	for _, name := range workload.ChecksOf(cq, workload.AdmissionFlavors(wl.Status.Admission)) {
		i := slices.IndexFunc(wl.Status.AdmissionChecks, func(s strata.AdmissionCheckState) bool { return s.Name == name })
		if i < 0 {
			continue // the admissionchecks controller adds it
		}
		var ac strata.AdmissionCheck
		if err := r.client.Get(ctx, types.NamespacedName{Name: name}, &ac); err != nil || ac.Spec.ControllerName != strata.ProvisioningRequestControllerName {
			continue
		}
		cfg, why := configOf(ctx, r.client, &ac)
		if why != "" {
			continue // the check is not Active: the queue admits nothing
		}
		d, c, err := r.sync(ctx, wl, cfg, &wl.Status.AdmissionChecks[i])
		if err != nil {
			return ctrl.Result{}, err
		}
		changed = changed || c
		if d > 0 && (after == 0 || d < after) {
			after = d
		}
	}
	if changed {
		if err := r.client.Status().Update(ctx, wl); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{RequeueAfter: after}, nil
}

// attempts are a workload's ProvisioningRequests for one check, in order.
type attempts struct {
	last     *unstructured.Unstructured
	n        int // the last one's number, 0 when none
	failures int
}

// sync brings one check's state to what its requests say; it returns
// when to look again (0: on the next event) and whether st changed.
func (r *Reconciler) sync(ctx context.Context, wl *strata.Workload, cfg *strata.ProvisioningRequestConfig, st *strata.AdmissionCheckState) (time.Duration, bool, error) {
	now := r.clock.Now()
	podSets := managed(wl, cfg)
	if len(podSets) == 0 {
		return 0, set(st, strata.CheckStateReady, "no pod set requests a resource the ProvisioningRequestConfig manages", nil, now), nil
	}
	if st.State != strata.CheckStatePending && st.State != strata.CheckStateReady {
		return 0, false, nil // Retry, Rejected: the admissionchecks controller acts
	}
	at, err := r.attemptsOf(ctx, wl, st.Name)
	if err != nil {
		return 0, false, err
	}
	limit, base, maxDelay := retryStrategy(cfg)
	if st.State == strata.CheckStateReady {
		// Its booking expired before the workload was admitted (its
		// topology not yet assigned, another check not Ready): the
		// capacity is gone; retried as a failure.
		if c := condition(at.last, condBookingExpired); c != nil && !meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadAdmitted) {
			return 0, r.failed(st, at, limit, c, now), nil
		}
		return 0, false, nil
	}
	switch {
	case at.last == nil:
		c, err := r.create(ctx, wl, cfg, st, podSets, 1, now)
		return 0, c, err
	case condition(at.last, condProvisioned) != nil && condition(at.last, condBookingExpired) == nil:
		if st.Message == provisionedMessage(at.last) {
			// Pending again with the message of its Ready state: the
			// request was provisioned for an earlier reservation, since
			// taken back (released keeps the message). A new request
			// for this one.
			c, err := r.create(ctx, wl, cfg, st, podSets, at.n+1, now)
			return 0, c, err
		}
		return 0, set(st, strata.CheckStateReady, provisionedMessage(at.last), updates(cfg, at.last, podSets), now), nil
	}
	failure := condition(at.last, condFailed)
	if failure == nil {
		failure = condition(at.last, condBookingExpired)
	}
	if failure == nil {
		message := fmt.Sprintf("ProvisioningRequest %s: waiting for the cluster autoscaler", at.last.GetName())
		if c := condition(at.last, condAccepted); c != nil {
			message = fmt.Sprintf("ProvisioningRequest %s is Accepted: waiting for capacity", at.last.GetName())
		}
		if c := conditionAny(at.last, condAccepted); c != nil && c.Status == metav1.ConditionFalse && c.Message != "" {
			message = fmt.Sprintf("ProvisioningRequest %s is not Accepted: %s", at.last.GetName(), c.Message)
		}
		return 0, set(st, strata.CheckStatePending, message, nil, now), nil
	}
	if !strings.HasPrefix(st.Message, failureMessage(at.last, failure)) {
		// A failure not acted on yet: Retry (the reservation is taken
		// back) or, retries spent, Rejected. (Once acted on, the check's
		// message, which its release keeps, says so.)
		return 0, r.failed(st, at, limit, failure, now), nil
	}
	// The failure was acted on (Retry, then a new reservation): the next
	// attempt after its backoff.
	delay := time.Duration(min(int64(base)<<min(at.failures-1, 30), int64(maxDelay))) * time.Second
	due := failure.LastTransitionTime.Add(delay)
	if now.Before(due) {
		return due.Sub(now), set(st, strata.CheckStatePending, fmt.Sprintf("%s: %s; attempt %d is made at %s",
			failureMessage(at.last, failure), failure.Message, at.n+1, due.UTC().Format(time.RFC3339)), nil, now), nil
	}
	c, err := r.create(ctx, wl, cfg, st, podSets, at.n+1, now)
	return 0, c, err
}

// failed puts a check whose latest request failed (c) in Retry, or in
// Rejected once limit retries are spent. It returns whether st changed.
func (r *Reconciler) failed(st *strata.AdmissionCheckState, at attempts, limit int32, c *metav1.Condition, now time.Time) bool {
	if at.failures > int(limit) {
		return set(st, strata.CheckStateRejected, fmt.Sprintf("%s: %s; no retries left (backoffLimitCount %d)", failureMessage(at.last, c), c.Message, limit), nil, now)
	}
	return set(st, strata.CheckStateRetry, fmt.Sprintf("%s: %s; retry %d of %d", failureMessage(at.last, c), c.Message, at.failures, limit), nil, now)
}

// failureMessage begins the check's message once request pr failed (c).
func failureMessage(pr *unstructured.Unstructured, c *metav1.Condition) string {
	if c.Type == condBookingExpired {
		return fmt.Sprintf("ProvisioningRequest %s: booking expired before the workload was admitted", pr.GetName())
	}
	return fmt.Sprintf("ProvisioningRequest %s failed", pr.GetName())
}

// provisionedMessage is the check's message while request pr is
// Provisioned for it.
func provisionedMessage(pr *unstructured.Unstructured) string {
	return fmt.Sprintf("ProvisioningRequest %s is Provisioned", pr.GetName())
}

// set gives st a state and message (and podSetUpdates); it returns
// whether st changed.
func set(st *strata.AdmissionCheckState, state strata.CheckState, message string, ups []strata.PodSetUpdate, now time.Time) bool {
	if st.State == state && st.Message == message {
		return false
	}
	if st.State != state {
		st.LastTransitionTime = metav1.NewTime(now)
	}
	st.State, st.Message, st.PodSetUpdates = state, truncate(message), ups
	return true
}

func truncate(m string) string {
	const max = 32768
	if len(m) > max {
		return m[:max]
	}
	return m
}

// attemptsOf reads a workload's requests for a check, attempt 1, 2, ...
// until one does not exist.
func (r *Reconciler) attemptsOf(ctx context.Context, wl *strata.Workload, check string) (attempts, error) {
	var at attempts
	for n := 1; ; n++ {
		pr := &unstructured.Unstructured{}
		pr.SetGroupVersionKind(GVK)
		err := r.client.Get(ctx, types.NamespacedName{Namespace: wl.Namespace, Name: RequestName(wl.Name, check, n)}, pr)
		if apierrors.IsNotFound(err) {
			return at, nil
		}
		if err != nil {
			return at, err
		}
		if !metav1.IsControlledBy(pr, wl) {
			// Left by an earlier Workload of the same name: not its.
			return at, nil
		}
		at.last, at.n = pr, n
		if condition(pr, condFailed) != nil || condition(pr, condBookingExpired) != nil && condition(pr, condProvisioned) == nil {
			at.failures++
		}
	}
}

// RequestName is the name of a workload's attempt n for a check (a hash
// replaces the tail of a name too long for the API).
func RequestName(wl, check string, n int) string {
	return limitName(fmt.Sprintf("%s-%s-%d", wl, check, n))
}

func limitName(name string) string {
	const max = 253
	if len(name) <= max {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:max-17] + "-" + hex.EncodeToString(sum[:8])
}

// create makes attempt n: a PodTemplate per pod set to provision for, and
// the ProvisioningRequest, owned by the workload (garbage-collected with
// it). The check stays Pending, saying so.
func (r *Reconciler) create(ctx context.Context, wl *strata.Workload, cfg *strata.ProvisioningRequestConfig, st *strata.AdmissionCheckState, podSets []string, n int, now time.Time) (bool, error) {
	name := RequestName(wl.Name, st.Name, n)
	var sets []any
	for _, ps := range podSets {
		tpl, err := r.template(ctx, wl, name, ps)
		if err != nil {
			return false, err
		}
		if err := r.client.Create(ctx, tpl); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, fmt.Errorf("creating PodTemplate %s: %w", tpl.Name, err)
		}
		sets = append(sets, map[string]any{"podTemplateRef": map[string]any{"name": tpl.Name}, "count": int64(admittedCount(wl, ps))})
	}
	params := map[string]any{}
	for k, v := range cfg.Spec.Parameters {
		params[k] = v
	}
	pr := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"provisioningClassName": cfg.Spec.ProvisioningClassName,
		"podSets":               sets,
	}}}
	if len(params) > 0 {
		_ = unstructured.SetNestedMap(pr.Object, params, "spec", "parameters")
	}
	pr.SetGroupVersionKind(GVK)
	pr.SetNamespace(wl.Namespace)
	pr.SetName(name)
	if err := controllerutil.SetControllerReference(wl, pr, r.client.Scheme()); err != nil {
		return false, err
	}
	if err := r.client.Create(ctx, pr); err != nil && !apierrors.IsAlreadyExists(err) {
		return false, fmt.Errorf("creating ProvisioningRequest %s: %w", name, err)
	}
	r.recorder.Eventf(wl, nil, corev1.EventTypeNormal, "ProvisioningRequestCreated", "Provision", "Created ProvisioningRequest %s (attempt %d, class %s)", name, n, cfg.Spec.ProvisioningClassName)
	return set(st, strata.CheckStatePending, fmt.Sprintf("ProvisioningRequest %s created: waiting for the cluster autoscaler", name), nil, now), nil
}

// template is the PodTemplate of pod set ps for request name: the pod
// set's pods as they will run on the admission's flavor (its node labels
// and tolerations).
func (r *Reconciler) template(ctx context.Context, wl *strata.Workload, name, ps string) (*corev1.PodTemplate, error) {
	set := workload.PodSet(wl, ps)
	if set == nil {
		return nil, fmt.Errorf("pod set %s: not in the workload", ps)
	}
	tpl := &corev1.PodTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: wl.Namespace, Name: limitName("ppt-" + name + "-" + ps)},
		Template:   *set.Template.DeepCopy(),
	}
	// A Workload's pod sets keep what scheduling needs, not the images,
	// which the API requires of a PodTemplate: the autoscaler only
	// simulates scheduling the pods.
	for _, cs := range [][]corev1.Container{tpl.Template.Spec.InitContainers, tpl.Template.Spec.Containers} {
		for i := range cs {
			if cs[i].Image == "" {
				cs[i].Image = placeholderImage
			}
		}
	}
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		if psa.Name != ps {
			continue
		}
		var flavor strata.ResourceFlavor
		if err := r.client.Get(ctx, types.NamespacedName{Name: psa.Flavor}, &flavor); err != nil {
			return nil, fmt.Errorf("pod set %s: flavor %s: %w", ps, psa.Flavor, err)
		}
		spec := &tpl.Template.Spec
		for k, v := range flavor.Spec.NodeLabels {
			if spec.NodeSelector == nil {
				spec.NodeSelector = map[string]string{}
			}
			spec.NodeSelector[k] = v
		}
		spec.Tolerations = append(spec.Tolerations, flavor.Spec.Tolerations...)
	}
	if err := controllerutil.SetControllerReference(wl, tpl, r.client.Scheme()); err != nil {
		return nil, err
	}
	return tpl, nil
}

// placeholderImage stands for a container image the Workload does not
// keep.
const placeholderImage = "registry.k8s.io/pause:3.10"

// admittedCount is the pods of pod set ps its reservation is for.
func admittedCount(wl *strata.Workload, ps string) int32 {
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		if psa.Name == ps {
			return psa.Count
		}
	}
	return 0
}

// managed are the pod sets to provision for: those requesting a resource
// of cfg's managedResources (every one when it is empty).
func managed(wl *strata.Workload, cfg *strata.ProvisioningRequestConfig) []string {
	var out []string
	for _, ps := range wl.Spec.PodSets {
		if admittedCount(wl, ps.Name) == 0 {
			continue
		}
		if len(cfg.Spec.ManagedResources) == 0 || slices.ContainsFunc(cfg.Spec.ManagedResources, func(r corev1.ResourceName) bool { return requests(&ps, r) }) {
			out = append(out, ps.Name)
		}
	}
	return out
}

func requests(ps *strata.PodSet, r corev1.ResourceName) bool {
	for _, c := range slices.Concat(ps.Template.Spec.InitContainers, ps.Template.Spec.Containers) {
		if _, ok := c.Resources.Requests[r]; ok {
			return true
		}
		if _, ok := c.Resources.Limits[r]; ok {
			return true
		}
	}
	return false
}

// updates are what a Ready check adds to the provisioned pod sets' pods:
// the annotations that make them consume the request, and the node
// selectors cfg takes from the request's provisioningClassDetails.
func updates(cfg *strata.ProvisioningRequestConfig, pr *unstructured.Unstructured, podSets []string) []strata.PodSetUpdate {
	details, _, _ := unstructured.NestedStringMap(pr.Object, "status", "provisioningClassDetails")
	var selector map[string]string
	if cfg.Spec.PodSetUpdates != nil {
		for _, ns := range cfg.Spec.PodSetUpdates.NodeSelector {
			if v, ok := details[ns.ValueFromProvisioningClassDetail]; ok {
				if selector == nil {
					selector = map[string]string{}
				}
				selector[ns.Key] = v
			}
		}
	}
	out := make([]strata.PodSetUpdate, 0, len(podSets))
	for _, ps := range podSets {
		out = append(out, strata.PodSetUpdate{
			Name:         ps,
			Annotations:  map[string]string{ConsumesAnnotation: pr.GetName(), ClassAnnotation: cfg.Spec.ProvisioningClassName},
			NodeSelector: selector,
		})
	}
	return out
}

// condition is the request's condition of type t when True, else nil.
func condition(pr *unstructured.Unstructured, t string) *metav1.Condition {
	c := conditionAny(pr, t)
	if c == nil || c.Status != metav1.ConditionTrue {
		return nil
	}
	return c
}

// conditionAny is the request's condition of type t, nil when absent.
func conditionAny(pr *unstructured.Unstructured, t string) *metav1.Condition {
	if pr == nil {
		return nil
	}
	list, _, _ := unstructured.NestedSlice(pr.Object, "status", "conditions")
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok || m["type"] != t {
			continue
		}
		c := &metav1.Condition{Type: t}
		if s, ok := m["status"].(string); ok {
			c.Status = metav1.ConditionStatus(s)
		}
		c.Reason, _ = m["reason"].(string)
		c.Message, _ = m["message"].(string)
		if s, ok := m["lastTransitionTime"].(string); ok {
			if ts, err := time.Parse(time.RFC3339, s); err == nil {
				c.LastTransitionTime = metav1.NewTime(ts)
			}
		}
		return c
	}
	return nil
}

// retryStrategy is cfg's, with Kueue's defaults.
func retryStrategy(cfg *strata.ProvisioningRequestConfig) (limit, base, maxDelay int32) {
	limit, base, maxDelay = defaultBackoffLimit, defaultBackoffBase, defaultBackoffMax
	if s := cfg.Spec.RetryStrategy; s != nil {
		if s.BackoffLimitCount != nil {
			limit = *s.BackoffLimitCount
		}
		if s.BackoffBaseSeconds != nil {
			base = *s.BackoffBaseSeconds
		}
		if s.BackoffMaxSeconds != nil {
			maxDelay = *s.BackoffMaxSeconds
		}
	}
	return limit, base, maxDelay
}

// configOf is the ProvisioningRequestConfig an AdmissionCheck names, or
// why it has none.
func configOf(ctx context.Context, c client.Client, ac *strata.AdmissionCheck) (*strata.ProvisioningRequestConfig, string) {
	p := ac.Spec.Parameters
	if p == nil || p.Kind != "ProvisioningRequestConfig" || (p.APIGroup != strata.GroupVersion.Group && p.APIGroup != "kueue.x-k8s.io") {
		return nil, "spec.parameters must name a ProvisioningRequestConfig (apiGroup strata.dev)"
	}
	cfg := &strata.ProvisioningRequestConfig{}
	if err := c.Get(ctx, types.NamespacedName{Name: p.Name}, cfg); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Sprintf("ProvisioningRequestConfig %s does not exist", p.Name)
		}
		return nil, fmt.Sprintf("ProvisioningRequestConfig %s: %v", p.Name, err)
	}
	return cfg, ""
}

// checkReconciler marks this controller's AdmissionChecks Active when it
// can run them.
type checkReconciler struct {
	client client.Client
	clock  clock.Clock
	served bool
}

func (r *checkReconciler) usingConfig(ctx context.Context, o client.Object) []reconcile.Request {
	var acs strata.AdmissionCheckList
	if err := r.client.List(ctx, &acs); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, ac := range acs.Items {
		if ac.Spec.ControllerName == strata.ProvisioningRequestControllerName && ac.Spec.Parameters != nil && ac.Spec.Parameters.Name == o.GetName() {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: ac.Name}})
		}
	}
	return out
}

func (r *checkReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ac := &strata.AdmissionCheck{}
	if err := r.client.Get(ctx, req.NamespacedName, ac); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if ac.Spec.ControllerName != strata.ProvisioningRequestControllerName {
		return ctrl.Result{}, nil
	}
	cond := metav1.Condition{Type: strata.AdmissionCheckActive, Status: metav1.ConditionTrue, Reason: "Active", LastTransitionTime: metav1.NewTime(r.clock.Now())}
	cfg, why := configOf(ctx, r.client, ac)
	switch {
	case !r.served:
		cond.Status, cond.Reason = metav1.ConditionFalse, "ProvisioningRequestNotServed"
		cond.Message = "the cluster does not serve autoscaling.x-k8s.io/v1 ProvisioningRequests: install the cluster autoscaler's CRD, then restart strata-agent"
	case why != "":
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "BadParametersRef", why
	default:
		cond.Message = fmt.Sprintf("the agent makes ProvisioningRequests of class %s", cfg.Spec.ProvisioningClassName)
	}
	if !meta.SetStatusCondition(&ac.Status.Conditions, cond) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.client.Status().Update(ctx, ac)
}
