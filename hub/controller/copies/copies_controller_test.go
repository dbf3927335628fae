package copies

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	strata "strata.dev/strata/api/v1beta1"
)

func TestPendingSince(t *testing.T) {
	at := metav1.Unix(100, 0)
	copyWith := func(c *metav1.Condition, admitted bool) *strata.Workload {
		wl := &strata.Workload{}
		if c != nil {
			wl.Status.Conditions = []metav1.Condition{*c}
		}
		if admitted {
			wl.Status.Admission = &strata.Admission{ClusterQueue: "cq"}
		}
		return wl
	}
	cases := map[string]struct {
		copyWL      *strata.Workload
		wantSince   time.Time
		wantMessage string
		wantPending bool
	}{
		"no copy Workload yet": {},
		"not looked at yet":    {copyWL: copyWith(nil, false)},
		"pending on the worker": {
			copyWL:      copyWith(&metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: "Pending", Message: "rack required: the best rack fits 3 of 4 pods", LastTransitionTime: at}, false),
			wantSince:   at.Time,
			wantMessage: "rack required: the best rack fits 3 of 4 pods",
			wantPending: true,
		},
		"refused, not pending": {
			copyWL: copyWith(&metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: "Inadmissible", LastTransitionTime: at}, false),
		},
		"admitted": {
			copyWL: copyWith(&metav1.Condition{Type: strata.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: "Admitted", LastTransitionTime: at}, true),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			since, message, pending := PendingSince(tc.copyWL)
			if !since.Equal(tc.wantSince) || message != tc.wantMessage || pending != tc.wantPending {
				t.Errorf("PendingSince() = %v, %q, %t; want %v, %q, %t", since, message, pending, tc.wantSince, tc.wantMessage, tc.wantPending)
			}
		})
	}
}

// TestCreateRefusal: every 4xx answer to a copy's creation is the worker's
// refusal, with a reason; server errors, throttling and timeouts are
// retried (until the admission timeout).
func TestCreateRefusal(t *testing.T) {
	gr := schema.GroupResource{Group: "batch", Resource: "jobs"}
	cases := map[string]struct {
		err  error
		want string
	}{
		"RBAC": {apierrors.NewForbidden(gr, "train", errors.New(`User "hub" cannot create resource "jobs"`)), ReasonForbidden},
		"a namespace being deleted": {func() error {
			err := apierrors.NewForbidden(gr, "train", errors.New("unable to create new content in namespace team-a because it is being terminated"))
			err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Field: "metadata.namespace"}}
			return err
		}(), ReasonNamespaceTerminating},
		"a ResourceQuota":        {apierrors.NewForbidden(gr, "train", errors.New("exceeded quota: team-a, requested: cpu=8, used: cpu=60, limited: cpu=64")), ReasonQuotaExceeded},
		"an admission webhook":   {apierrors.NewForbidden(gr, "train", errors.New(`admission webhook "policy.example.com" denied the request: no GPUs on Fridays`)), ReasonAdmissionDenied},
		"a bad request":          {apierrors.NewBadRequest("the copy is too large"), ReasonRefused},
		"a conflict":             {apierrors.NewConflict(gr, "train", errors.New("changed")), ReasonRefused},
		"request entity too big": {apierrors.NewRequestEntityTooLargeError("limit is 3145728"), ReasonRefused},
		"a server error":         {apierrors.NewInternalError(errors.New("etcd leader changed")), ""},
		"unavailable":            {apierrors.NewServiceUnavailable("shutting down"), ""},
		"throttled":              {apierrors.NewTooManyRequests("slow down", 1), ""},
		"a timeout":              {apierrors.NewTimeoutError("request timed out", 1), ""},
		"no answer at all":       {errors.New("dial tcp 10.0.0.1:443: connect: connection refused"), ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := createRefusal(tc.err); got != tc.want {
				t.Errorf("createRefusal(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}

// TestOnboardable: the hub creates LocalQueues only in namespaces its
// onboarding made or that the worker's administrators opted in.
func TestOnboardable(t *testing.T) {
	cases := map[string]struct {
		labels map[string]string
		want   bool
	}{
		"made by this hub's onboarding":   {map[string]string{strata.OnboardedByLabel: "hub-a"}, true},
		"made by another hub's":           {map[string]string{strata.OnboardedByLabel: "hub-b"}, false},
		"opted in by the worker's admin":  {map[string]string{strata.HubOnboardingLabel: strata.HubOnboardingAllowed}, true},
		"opt-in label with another value": {map[string]string{strata.HubOnboardingLabel: "true"}, false},
		"a namespace of the worker's own": {nil, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team", Labels: tc.labels}}
			if got := Onboardable(ns, "hub-a"); got != tc.want {
				t.Errorf("Onboardable() = %t, want %t", got, tc.want)
			}
		})
	}
}

// TestOnboardRefusal: what the worker's side caused is named, with a
// message that says what to do; the rest is retried.
func TestOnboardRefusal(t *testing.T) {
	nsGR := schema.GroupResource{Resource: "namespaces"}
	lqGR := schema.GroupResource{Group: "strata.dev", Resource: "localqueues"}
	cases := map[string]struct {
		err        error
		wantReason string
		wantIn     string
	}{
		"a namespace the hub may not use": {&notOnboardable{"namespace team exists on w1 and ..."}, ReasonNamespaceNotOnboardable, "namespace team exists"},
		"a namespace being deleted": {apierrors.NewForbidden(lqGR, "q", errors.New("unable to create new content in namespace team because it is being terminated")),
			ReasonNamespaceTerminating, "being deleted"},
		"a policy of the worker": {apierrors.NewForbidden(lqGR, "q", errors.New(`ValidatingAdmissionPolicy 'strata-hub-access' denied request: protected`)),
			ReasonAdmissionDenied, "a policy of the worker refused it"},
		"RBAC":           {apierrors.NewForbidden(nsGR, "team", errors.New(`User "hub" cannot create resource "namespaces"`)), ReasonForbidden, "hubAccess.onboarding=true"},
		"a server error": {apierrors.NewInternalError(errors.New("etcd")), "", ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			reason, message := onboardRefusal("w1", tc.err)
			if reason != tc.wantReason || !strings.Contains(message, tc.wantIn) {
				t.Errorf("onboardRefusal() = %q, %q; want %q containing %q", reason, message, tc.wantReason, tc.wantIn)
			}
		})
	}
}
