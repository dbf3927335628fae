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
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
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
	// The same, as older cluster autoscalers read them.
	legacyConsumesAnnotation = "cluster-autoscaler.kubernetes.io/consume-provisioning-request"
	legacyClassAnnotation    = "cluster-autoscaler.kubernetes.io/provisioning-class-name"
)

// The ProvisioningRequest's conditions (the cluster autoscaler's).
const (
	condProvisioned     = "Provisioned"
	condFailed          = "Failed"
	condBookingExpired  = "BookingExpired"
	condCapacityRevoked = "CapacityRevoked"
	condAccepted        = "Accepted"
)

// takenNameRetry is how often a check whose request's name another
// object holds looks again.
const takenNameRetry = 10 * time.Second

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
	for _, obj := range []client.Object{&strata.AdmissionCheck{}, &strata.ProvisioningRequestConfig{}} {
		gvk, err := apiutil.GVKForObject(obj, mgr.GetScheme())
		if err != nil {
			return err
		}
		if _, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			// CRDs older than the agent (helm upgrade does not update
			// them): no ProvisioningRequest check, and no crash.
			ctrl.Log.WithName("setup").Info("Not running the ProvisioningRequest admission check: a CRD is not installed (apply the agent chart's crds/: strata-agent restarts itself once they are served)",
				"kind", gvk.Kind, "error", err.Error())
			return nil
		}
	}
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

// attempts are a workload's ProvisioningRequests for one check.
type attempts struct {
	// last is the latest one (nil when none), n its number (0 when
	// none): as Kueue's, the retries a failure of attempt n has had are
	// n (whatever ended the earlier ones: a failure, a booking that
	// expired, a reservation taken back).
	last *unstructured.Unstructured
	n    int
}

// retry is a ProvisioningRequestConfig's retryStrategy, defaults applied.
type retry struct {
	limit, base, max int32
}

// decision is what one check's state calls for.
type decision struct {
	// create is the number of the attempt to make (0: none).
	create int
	// state and message are the check's new ones ("" keeps them); ready
	// carries the request's podSetUpdates.
	state   strata.CheckState
	message string
	// after is when to look again (0: on the next event).
	after time.Duration
	// revoked: the autoscaler took the capacity back.
	revoked bool
}

// decide says what a check in state st calls for, given the workload's
// requests for it (at), the retry strategy, and whether the workload is
// admitted (KEP-1136's semantics):
//   - no request yet: make attempt 1;
//   - Provisioned: Ready (a Pending check still saying so is of an
//     earlier reservation, since taken back: a new attempt);
//   - Failed, or BookingExpired before the admission: Retry, or Rejected
//     once limit retries are spent; once acted on (the check Pending again
//     for a new reservation, its message kept), the next attempt after
//     the backoff;
//   - CapacityRevoked: Rejected (the workload is deactivated);
//   - otherwise: Pending, saying what the request waits for.
//
// The check's own message tells which of a request's outcomes it has
// acted on: its release keeps it.
func decide(st *strata.AdmissionCheckState, at attempts, rs retry, admitted bool, now time.Time) decision {
	if at.last == nil {
		return decision{create: 1}
	}
	name := at.last.GetName()
	earlier := st.State == strata.CheckStatePending && st.Message == provisionedMessage(name)
	if c := condition(at.last, condCapacityRevoked); c != nil && !earlier {
		return decision{state: strata.CheckStateRejected, message: fmt.Sprintf("ProvisioningRequest %s: capacity revoked: %s", name, c.Message), revoked: true}
	}
	expired := condition(at.last, condBookingExpired)
	if st.State == strata.CheckStateReady {
		// Its booking expired before the workload was admitted (its
		// topology not yet assigned, another check not Ready): the
		// capacity is gone; retried as a failure.
		if expired != nil && !admitted {
			return failed(at, rs, expired)
		}
		return decision{}
	}
	if st.State != strata.CheckStatePending {
		return decision{} // Retry, Rejected: the admissionchecks controller acts
	}
	if earlier {
		return decision{create: at.n + 1}
	}
	if condition(at.last, condProvisioned) != nil && expired == nil {
		return decision{state: strata.CheckStateReady, message: provisionedMessage(name)}
	}
	failure := condition(at.last, condFailed)
	if failure == nil {
		failure = expired
	}
	if failure == nil {
		message := fmt.Sprintf("ProvisioningRequest %s: waiting for the cluster autoscaler", name)
		if c := conditionAny(at.last, condAccepted); c != nil {
			switch {
			case c.Status == metav1.ConditionTrue:
				message = fmt.Sprintf("ProvisioningRequest %s is Accepted: waiting for capacity", name)
			case c.Status == metav1.ConditionFalse && c.Message != "":
				message = fmt.Sprintf("ProvisioningRequest %s is not Accepted: %s", name, c.Message)
			}
		}
		return decision{state: strata.CheckStatePending, message: message}
	}
	if !strings.HasPrefix(st.Message, failureMessage(name, failure)) {
		return failed(at, rs, failure)
	}
	// Acted on (Retry, then a new reservation): the next attempt after
	// base·2^(n-1), at most max, from the failure.
	delay := time.Duration(min(int64(rs.base)<<min(max(at.n-1, 0), 30), int64(rs.max))) * time.Second
	due := failure.LastTransitionTime.Add(delay)
	if now.Before(due) {
		return decision{state: strata.CheckStatePending, after: due.Sub(now), message: fmt.Sprintf("%s: %s; attempt %d is made at %s",
			failureMessage(name, failure), failure.Message, at.n+1, due.UTC().Format(time.RFC3339))}
	}
	return decision{create: at.n + 1}
}

// failed is Retry for a request that failed (c), or Rejected once the
// retries are spent.
func failed(at attempts, rs retry, c *metav1.Condition) decision {
	name := at.last.GetName()
	n := at.n
	if n > int(rs.limit) {
		return decision{state: strata.CheckStateRejected, message: fmt.Sprintf("%s: %s; no retries left (backoffLimitCount %d)", failureMessage(name, c), c.Message, rs.limit)}
	}
	return decision{state: strata.CheckStateRetry, message: fmt.Sprintf("%s: %s; retry %d of %d", failureMessage(name, c), c.Message, n, rs.limit)}
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
		return 0, false, nil
	}
	at, older, err := r.attemptsOf(ctx, wl, st.Name)
	if err != nil {
		return 0, false, err
	}
	if err := r.deleteOlder(ctx, wl, older); err != nil {
		return 0, false, err
	}
	d := decide(st, at, retryStrategy(cfg), meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadAdmitted), now)
	if d.create > 0 {
		changed, taken, err := r.create(ctx, wl, cfg, st, podSets, d.create, now)
		if taken {
			// Nothing of this workload's wakes it when that request goes.
			return takenNameRetry, changed, err
		}
		return 0, changed, err
	}
	if d.revoked {
		r.recorder.Eventf(wl, nil, corev1.EventTypeWarning, "CapacityRevoked", "Provision", "%s", d.message)
	}
	if d.state == "" {
		return d.after, false, nil
	}
	var ups []strata.PodSetUpdate
	if d.state == strata.CheckStateReady {
		ups = updates(cfg, at.last, podSets)
	}
	return d.after, set(st, d.state, d.message, ups, now), nil
}

// failureMessage begins the check's message once request name failed (c).
func failureMessage(name string, c *metav1.Condition) string {
	if c.Type == condBookingExpired {
		return fmt.Sprintf("ProvisioningRequest %s: booking expired before the workload was admitted", name)
	}
	return fmt.Sprintf("ProvisioningRequest %s failed", name)
}

// provisionedMessage is the check's message while request name is
// Provisioned for it.
func provisionedMessage(name string) string {
	return fmt.Sprintf("ProvisioningRequest %s is Provisioned", name)
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

// The annotations a request carries: the check it is for, and its
// attempt (the name says both too, but a long one is cut and hashed).
const (
	checkAnnotation   = "strata.dev/admission-check"
	attemptAnnotation = "strata.dev/provisioning-attempt"
)

// attemptsOf reads a workload's requests for a check: the latest, and
// the earlier ones it still has (older returns them; they are deleted
// once a later attempt exists, as Kueue keeps only a check's last
// request: what they booked goes back to the autoscaler). Only the
// workload's own (controlled by it): one left by an earlier Workload of
// the same name is not its.
func (r *Reconciler) attemptsOf(ctx context.Context, wl *strata.Workload, check string) (at attempts, older []*unstructured.Unstructured, err error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(GVK.GroupVersion().WithKind(GVK.Kind + "List"))
	if err := r.client.List(ctx, list, client.InNamespace(wl.Namespace)); err != nil {
		return at, nil, err
	}
	var mine []*unstructured.Unstructured
	for i := range list.Items {
		pr := &list.Items[i]
		if !metav1.IsControlledBy(pr, wl) {
			continue
		}
		n := attemptOf(pr, wl.Name, check)
		if n == 0 {
			continue
		}
		mine = append(mine, pr)
		if n > at.n {
			at.last, at.n = pr, n
		}
	}
	for _, pr := range mine {
		if pr != at.last {
			older = append(older, pr)
		}
	}
	return at, older, nil
}

// attemptOf is the attempt of check that request pr of workload wl is, 0
// when it is another check's: from its annotations, or its name (a
// request made before they were written).
func attemptOf(pr *unstructured.Unstructured, wl, check string) int {
	a := pr.GetAnnotations()
	if c, ok := a[checkAnnotation]; ok {
		if c != check {
			return 0
		}
		n, err := strconv.Atoi(a[attemptAnnotation])
		if err != nil || n < 1 {
			return 0
		}
		return n
	}
	name := pr.GetName()
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return 0
	}
	n, err := strconv.Atoi(name[i+1:])
	if err != nil || n < 1 || RequestName(wl, check, n) != name {
		return 0
	}
	return n
}

// deleteOlder deletes a workload's requests of earlier attempts, and
// their PodTemplates.
func (r *Reconciler) deleteOlder(ctx context.Context, wl *strata.Workload, older []*unstructured.Unstructured) error {
	var errs []error
	for _, pr := range older {
		for i := range wl.Spec.PodSets {
			tpl := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: wl.Namespace, Name: templateName(pr.GetName(), wl.Spec.PodSets[i].Name)}}
			if err := r.client.Delete(ctx, tpl); client.IgnoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("deleting PodTemplate %s of an earlier attempt: %w", tpl.Name, err))
			}
		}
		uid := pr.GetUID()
		if err := r.client.Delete(ctx, pr, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("deleting ProvisioningRequest %s of an earlier attempt: %w", pr.GetName(), err))
		}
	}
	return errors.Join(errs...)
}

// RequestName is the name of a workload's attempt n for a check (a hash
// replaces the tail of a name too long for the API).
func RequestName(wl, check string, n int) string {
	return limitName(fmt.Sprintf("%s-%s-%d", wl, check, n))
}

// templateName is the PodTemplate of request name for pod set ps.
func templateName(name, ps string) string { return limitName("ppt-" + name + "-" + ps) }

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
// taken says the request's name is another object's (the check waits,
// saying so).
func (r *Reconciler) create(ctx context.Context, wl *strata.Workload, cfg *strata.ProvisioningRequestConfig, st *strata.AdmissionCheckState, podSets []string, n int, now time.Time) (changed, taken bool, err error) {
	name := RequestName(wl.Name, st.Name, n)
	var tpls []*corev1.PodTemplate
	var counts []int64
	for _, ps := range podSets {
		tpl, err := r.template(ctx, wl, name, ps)
		if err != nil {
			return false, false, err
		}
		// Alike pod sets in one PodTemplate (podSetMergePolicy).
		if i := slices.IndexFunc(tpls, func(t *corev1.PodTemplate) bool {
			return alike(cfg.Spec.PodSetMergePolicy, &t.Template, &tpl.Template)
		}); i >= 0 {
			counts[i] += int64(admittedCount(wl, ps))
			continue
		}
		tpls, counts = append(tpls, tpl), append(counts, int64(admittedCount(wl, ps)))
	}
	var sets []any
	for i, tpl := range tpls {
		if err := r.client.Create(ctx, tpl); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, false, fmt.Errorf("creating PodTemplate %s: %w", tpl.Name, err)
		}
		sets = append(sets, map[string]any{"podTemplateRef": map[string]any{"name": tpl.Name}, "count": counts[i]})
	}
	params := map[string]any{}
	for k, v := range parameters(cfg, wl) {
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
	pr.SetAnnotations(map[string]string{checkAnnotation: st.Name, attemptAnnotation: strconv.Itoa(n)})
	if err := controllerutil.SetControllerReference(wl, pr, r.client.Scheme()); err != nil {
		return false, false, err
	}
	if err := r.client.Create(ctx, pr); apierrors.IsAlreadyExists(err) {
		// Its name taken by a request that is not this workload's (left by
		// an earlier Workload of the same name, whose deletion has not
		// collected it yet, or made by someone else): it does not stand
		// for this attempt; the check says so and waits.
		existing := &unstructured.Unstructured{}
		existing.SetGroupVersionKind(GVK)
		if err := r.client.Get(ctx, client.ObjectKeyFromObject(pr), existing); err != nil {
			return false, false, client.IgnoreNotFound(err)
		}
		if !metav1.IsControlledBy(existing, wl) {
			return set(st, strata.CheckStatePending, fmt.Sprintf("ProvisioningRequest %s exists and is not this workload's: it is made once that one is gone", name), nil, now), true, nil
		}
	} else if err != nil {
		return false, false, fmt.Errorf("creating ProvisioningRequest %s: %w", name, err)
	}
	r.recorder.Eventf(wl, nil, corev1.EventTypeNormal, "ProvisioningRequestCreated", "Provision", "Created ProvisioningRequest %s (attempt %d, class %s)", name, n, cfg.Spec.ProvisioningClassName)
	return set(st, strata.CheckStatePending, fmt.Sprintf("ProvisioningRequest %s created: waiting for the cluster autoscaler", name), nil, now), false, nil
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
		ObjectMeta: metav1.ObjectMeta{Namespace: wl.Namespace, Name: templateName(name, ps)},
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

// parameters are a request's spec.parameters: the config's, and the
// workload's provreq.kueue.x-k8s.io/ annotations (its job's), which win
// over them, as in Kueue.
func parameters(cfg *strata.ProvisioningRequestConfig, wl *strata.Workload) map[string]string {
	out := maps.Clone(cfg.Spec.Parameters)
	for k, v := range wl.Annotations {
		if p, ok := strings.CutPrefix(k, strata.ProvisioningRequestParameterPrefix); ok && p != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[p] = v
		}
	}
	return out
}

// alike says whether two pod sets' templates (as they run on their
// flavor) go into one PodTemplate of a request under policy (nil: none
// do).
func alike(policy *strata.PodSetMergePolicy, a, b *corev1.PodTemplateSpec) bool {
	switch ptr.Deref(policy, "") {
	case strata.IdenticalPodTemplates:
		return equality.Semantic.DeepEqual(a, b)
	case strata.IdenticalWorkloadSchedulingRequirements:
		requests := func(cs []corev1.Container) []corev1.ResourceList {
			out := make([]corev1.ResourceList, len(cs))
			for i := range cs {
				out[i] = cs[i].Resources.Requests
			}
			return out
		}
		x, y := &a.Spec, &b.Spec
		return equality.Semantic.DeepEqual(requests(x.Containers), requests(y.Containers)) &&
			equality.Semantic.DeepEqual(requests(x.InitContainers), requests(y.InitContainers)) &&
			equality.Semantic.DeepEqual(x.Resources, y.Resources) &&
			equality.Semantic.DeepEqual(x.NodeSelector, y.NodeSelector) &&
			equality.Semantic.DeepEqual(x.Tolerations, y.Tolerations) &&
			equality.Semantic.DeepEqual(x.Affinity, y.Affinity) &&
			equality.Semantic.DeepEqual(x.ResourceClaims, y.ResourceClaims)
	}
	return false
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
			Name: ps,
			Annotations: map[string]string{
				ConsumesAnnotation: pr.GetName(), ClassAnnotation: cfg.Spec.ProvisioningClassName,
				legacyConsumesAnnotation: pr.GetName(), legacyClassAnnotation: cfg.Spec.ProvisioningClassName,
			},
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
func retryStrategy(cfg *strata.ProvisioningRequestConfig) retry {
	rs := retry{limit: defaultBackoffLimit, base: defaultBackoffBase, max: defaultBackoffMax}
	if s := cfg.Spec.RetryStrategy; s != nil {
		rs.limit = ptrOr(s.BackoffLimitCount, rs.limit)
		rs.base = ptrOr(s.BackoffBaseSeconds, rs.base)
		rs.max = ptrOr(s.BackoffMaxSeconds, rs.max)
	}
	return rs
}

func ptrOr(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
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
		cond.Message = "the cluster does not serve autoscaling.x-k8s.io/v1 ProvisioningRequests: install the cluster autoscaler's CRD (strata-agent restarts itself within 30s to run the check)"
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
