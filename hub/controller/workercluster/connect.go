package workercluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	strata "strata.dev/strata/api/v1beta1"
)

// This file answers: can the hub reach the worker, as itself, and is it
// the cluster the hub dispatched to?

// connect resolves the worker's credential, connects, and checks the
// hub's permissions there and which cluster it reaches (recorded in
// status). It returns the Connected condition.
func (r *Reconciler) connect(ctx context.Context, wc *strata.WorkerCluster, status *strata.WorkerClusterStatus) metav1.Condition {
	notConnected := func(reason, format string, args ...any) metav1.Condition {
		r.fleet.Disconnect(wc.Name)
		r.mu.Lock()
		delete(r.checked, wc.Name)
		r.mu.Unlock()
		return metav1.Condition{Type: strata.WorkerClusterConnected, Status: metav1.ConditionFalse, Reason: reason, Message: fmt.Sprintf(format, args...)}
	}
	cred, failed := r.resolve(ctx, wc)
	if failed != nil {
		return notConnected(failed.reason, "%s", failed.message)
	}
	cfg := cred.config
	cfg.Timeout = connectTimeout
	now := r.clock.Now()
	r.mu.Lock()
	last, ok := r.checked[wc.Name]
	r.mu.Unlock()
	if !ok || last.identity != cred.identity || now.Sub(last.at) >= permissionRecheck || r.fleet.OtherCluster(wc.Name) {
		if missing, err := missingPermissions(ctx, cfg); err != nil {
			return notConnected(ReasonUnreachable, "%v", err)
		} else if len(missing) > 0 {
			return notConnected(ReasonForbidden, "the hub's credential (%s) may not %s on the worker", cred.via, strings.Join(missing, "; "))
		}
		id, err := clusterID(ctx, cfg)
		if apierrors.IsForbidden(err) {
			return notConnected(ReasonForbidden, "the hub's credential (%s) may not get namespace kube-system on the worker (its cluster ID): %v", cred.via, err)
		} else if err != nil {
			return notConnected(ReasonUnreachable, "%v", err)
		}
		last = permissionCheck{identity: cred.identity, at: now, clusterID: id}
		r.mu.Lock()
		r.checked[wc.Name] = last
		r.mu.Unlock()
	}
	if reason, message := r.claim(ctx, wc, last.clusterID); reason != "" {
		return notConnected(reason, "%s", message)
	}
	status.ClusterSwitch = switchOf(wc.Status, last.clusterID, now)
	status.ClusterID = last.clusterID
	r.fleet.SetClusterID(wc.Name, last.clusterID)
	if sw := status.ClusterSwitch; sw != nil && sw.To == last.clusterID {
		r.fleet.RestoreSwitch(wc.Name, sw.From, sw.To, sw.Time.Time)
	}
	if err := r.fleet.Connect(ctx, wc.Name, cred.identity, cfg, connectTimeout); err != nil {
		return notConnected(ReasonUnreachable, "%v", err)
	}
	if down := r.fleet.DownReason(wc.Name); down != "" {
		// Not disconnected: the probe goes on and says when it answers
		// again, and the informers resume where they were.
		return metav1.Condition{Type: strata.WorkerClusterConnected, Status: metav1.ConditionFalse, Reason: ReasonUnreachable, Message: down}
	}
	return metav1.Condition{Type: strata.WorkerClusterConnected, Status: metav1.ConditionTrue, Reason: ReasonConnected,
		Message: fmt.Sprintf("connected to %s through %s", cfg.Host, cred.via)}
}

// switchOf is the cluster switch a WorkerCluster's status records once
// the hub connects to cluster id: a new one when the recorded cluster was
// another (the switch was accepted, see claim), else the one recorded.
func switchOf(st strata.WorkerClusterStatus, id string, now time.Time) *strata.ClusterSwitchStatus {
	if st.ClusterID != "" && st.ClusterID != id {
		return &strata.ClusterSwitchStatus{From: st.ClusterID, To: id, Time: metav1.NewTime(now)}
	}
	return st.ClusterSwitch
}

// clusterID reads the UID of the worker's kube-system namespace: the
// cluster's identity, which no credential or address change alters.
func clusterID(ctx context.Context, cfg *rest.Config) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", fmt.Errorf("a client for the worker: %w", err)
	}
	ns, err := cs.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading the worker's identity (the UID of namespace kube-system) at %s: %w", cfg.Host, err)
	}
	return string(ns.UID), nil
}

// claim checks that the cluster the credential reaches (id) is the one
// this WorkerCluster dispatched to, and that no other WorkerCluster stands
// for it; it returns the Connected condition's reason and message when
// not. A changed cluster is accepted when the WorkerCluster's
// strata.dev/accept-cluster-id annotation names it.
func (r *Reconciler) claim(ctx context.Context, wc *strata.WorkerCluster, id string) (string, string) {
	if rec := wc.Status.ClusterID; rec != "" && rec != id && wc.Annotations[strata.AcceptClusterIDAnnotation] != id {
		return ReasonClusterChanged, fmt.Sprintf("the credential now reaches another cluster (ID %s) than the one the hub dispatched to (ID %s), whose copies may still run there; "+
			"the hub dispatches nothing until the credential reaches %s again, or the WorkerCluster is annotated %s=%s to give up those copies (their workloads are placed again) and use the new cluster",
			id, rec, rec, strata.AcceptClusterIDAnnotation, id)
	}
	var list strata.WorkerClusterList
	if err := r.client.List(ctx, &list); err != nil {
		return ReasonUnreachable, fmt.Sprintf("listing WorkerClusters: %v", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	exists := map[string]bool{}
	for _, other := range list.Items {
		exists[other.Name] = true
		if other.Name != wc.Name && other.Status.ClusterID == id {
			return ReasonDuplicateCluster, fmt.Sprintf("the credential reaches cluster %s, which WorkerCluster %s already stands for; two WorkerClusters of one cluster would take each other's copies for orphans", id, other.Name)
		}
	}
	if holder, ok := r.claims[id]; ok && holder != wc.Name && exists[holder] {
		return ReasonDuplicateCluster, fmt.Sprintf("the credential reaches cluster %s, which WorkerCluster %s already stands for; two WorkerClusters of one cluster would take each other's copies for orphans", id, holder)
	}
	for other, name := range r.claims {
		if name == wc.Name && other != id {
			delete(r.claims, other)
		}
	}
	r.claims[id] = wc.Name
	return "", ""
}

// needed are the permissions the hub needs on a worker to place on it and
// follow its copies there. Creating and deleting Jobs is checked where it
// happens, per namespace: a refusal there is the WorkerCluster's
// Dispatching condition.
var needed = []authorizationv1.ResourceAttributes{
	{Verb: "list", Group: "strata.dev", Resource: "capacitysummaries"},
	{Verb: "watch", Group: "strata.dev", Resource: "capacitysummaries"},
	{Verb: "list", Group: "strata.dev", Resource: "workloads"},
	{Verb: "watch", Group: "strata.dev", Resource: "workloads"},
	{Verb: "list", Group: "batch", Resource: "jobs"},
	{Verb: "watch", Group: "batch", Resource: "jobs"},
}

// missingPermissions asks the worker which of the needed permissions the
// credential lacks ("list capacitysummaries.strata.dev (cluster-wide)").
func missingPermissions(ctx context.Context, cfg *rest.Config) ([]string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("a client for the worker: %w", err)
	}
	var missing []string
	for _, attrs := range needed {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs}}
		got, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("the worker at %s does not answer: %w", cfg.Host, err)
		}
		if !got.Status.Allowed {
			where := "cluster-wide"
			if attrs.Namespace != "" {
				where = "in namespace " + attrs.Namespace
			}
			missing = append(missing, fmt.Sprintf("%s %s.%s (%s)", attrs.Verb, attrs.Resource, attrs.Group, where))
		}
	}
	return missing, nil
}
