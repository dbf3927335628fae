package copies

import (
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
)

func TestClearRun(t *testing.T) {
	started := ptr.To(metav1.Unix(100, 0))
	running := batchv1.JobStatus{Active: 4, Ready: ptr.To[int32](3), Terminating: ptr.To[int32](1), StartTime: started}
	complete := batchv1.JobStatus{Succeeded: 4, StartTime: started, CompletionTime: ptr.To(metav1.Unix(200, 0)),
		Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}
	cases := map[string]struct {
		status      batchv1.JobStatus
		suspended   bool
		want        batchv1.JobStatus
		wantChanged bool
	}{
		"a refused copy's run leaves nothing active; the start time stays on a running Job": {
			status:      running,
			want:        batchv1.JobStatus{Ready: ptr.To[int32](0), Terminating: ptr.To[int32](0), StartTime: started},
			wantChanged: true,
		},
		"a suspended Job loses its start time too": {
			status:      running,
			suspended:   true,
			want:        batchv1.JobStatus{Ready: ptr.To[int32](0), Terminating: ptr.To[int32](0)},
			wantChanged: true,
		},
		"a copy that never started changes nothing": {
			status: batchv1.JobStatus{},
			want:   batchv1.JobStatus{},
		},
		"a finished Job keeps its final status": {
			status:    complete,
			suspended: true,
			want:      complete,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := *tc.status.DeepCopy()
			changed := ClearRun(&got, tc.suspended)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ClearRun() status (-want,+got):\n%s", diff)
			}
			if changed != tc.wantChanged {
				t.Errorf("ClearRun() = %t, want %t", changed, tc.wantChanged)
			}
		})
	}
}

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
		"RBAC":                   {apierrors.NewForbidden(gr, "train", errors.New(`User "hub" cannot create resource "jobs"`)), ReasonForbidden},
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
