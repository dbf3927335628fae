package provisioning

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	strata "strata.dev/strata/api/v1beta1"
)

var now = time.Date(2026, time.December, 6, 12, 0, 0, 0, time.UTC)

// request is ProvisioningRequest name with conditions type=status, each
// at its time.
func request(name string, conds ...cond) *unstructured.Unstructured {
	pr := &unstructured.Unstructured{Object: map[string]any{}}
	pr.SetGroupVersionKind(GVK)
	pr.SetName(name)
	var list []any
	for _, c := range conds {
		list = append(list, map[string]any{"type": c.t, "status": c.status, "message": c.message, "lastTransitionTime": c.at.Format(time.RFC3339)})
	}
	if list != nil {
		_ = unstructured.SetNestedSlice(pr.Object, list, "status", "conditions")
	}
	return pr
}

type cond struct {
	t, status, message string
	at                 time.Time
}

func TestDecide(t *testing.T) {
	rs := retry{limit: 2, base: 60, max: 100}
	pending := func(message string) *strata.AdmissionCheckState {
		return &strata.AdmissionCheckState{Name: "prov", State: strata.CheckStatePending, Message: message}
	}
	ready := &strata.AdmissionCheckState{Name: "prov", State: strata.CheckStateReady, Message: "ProvisioningRequest wl-prov-1 is Provisioned"}
	failedAt := now.Add(-30 * time.Second)
	cases := map[string]struct {
		st       *strata.AdmissionCheckState
		at       attempts
		admitted bool
		want     decision
	}{
		"no request: the first attempt": {
			st: pending(""), want: decision{create: 1},
		},
		"not accepted yet": {
			st: pending(""), at: attempts{last: request("wl-prov-1"), n: 1},
			want: decision{state: strata.CheckStatePending, message: "ProvisioningRequest wl-prov-1: waiting for the cluster autoscaler"},
		},
		"accepted": {
			st: pending(""), at: attempts{last: request("wl-prov-1", cond{"Accepted", "True", "", now}), n: 1},
			want: decision{state: strata.CheckStatePending, message: "ProvisioningRequest wl-prov-1 is Accepted: waiting for capacity"},
		},
		"not accepted, with a reason": {
			st: pending(""), at: attempts{last: request("wl-prov-1", cond{"Accepted", "False", "unknown class", now}), n: 1},
			want: decision{state: strata.CheckStatePending, message: "ProvisioningRequest wl-prov-1 is not Accepted: unknown class"},
		},
		"provisioned: Ready": {
			st: pending("ProvisioningRequest wl-prov-1: waiting for the cluster autoscaler"), at: attempts{last: request("wl-prov-1", cond{"Provisioned", "True", "", now}), n: 1},
			want: decision{state: strata.CheckStateReady, message: "ProvisioningRequest wl-prov-1 is Provisioned"},
		},
		"provisioned for an earlier reservation: a new attempt": {
			st: pending("ProvisioningRequest wl-prov-1 is Provisioned"), at: attempts{last: request("wl-prov-1", cond{"Provisioned", "True", "", now}, cond{"BookingExpired", "True", "", now}), n: 1},
			want: decision{create: 2},
		},
		"failed: Retry": {
			st: pending(""), at: attempts{last: request("wl-prov-1", cond{"Failed", "True", "no capacity", failedAt}), n: 1},
			want: decision{state: strata.CheckStateRetry, message: "ProvisioningRequest wl-prov-1 failed: no capacity; retry 1 of 2"},
		},
		"failed, acted on: the next attempt waits for its backoff": {
			st: pending("ProvisioningRequest wl-prov-1 failed: no capacity; retry 1 of 2"),
			at: attempts{last: request("wl-prov-1", cond{"Failed", "True", "no capacity", failedAt}), n: 1},
			want: decision{state: strata.CheckStatePending, after: 30 * time.Second,
				message: "ProvisioningRequest wl-prov-1 failed: no capacity; attempt 2 is made at 2026-12-06T12:00:30Z"},
		},
		"failed twice, acted on: the backoff doubles, up to its maximum": {
			st: pending("ProvisioningRequest wl-prov-2 failed: no capacity; retry 2 of 2"),
			at: attempts{last: request("wl-prov-2", cond{"Failed", "True", "no capacity", failedAt}), n: 2},
			want: decision{state: strata.CheckStatePending, after: 70 * time.Second,
				message: "ProvisioningRequest wl-prov-2 failed: no capacity; attempt 3 is made at 2026-12-06T12:01:10Z"},
		},
		"failed, acted on, backoff over: the next attempt": {
			st:   pending("ProvisioningRequest wl-prov-1 failed: no capacity; attempt 2 is made at 2026-12-06T11:59:30Z"),
			at:   attempts{last: request("wl-prov-1", cond{"Failed", "True", "no capacity", now.Add(-2 * time.Minute)}), n: 1},
			want: decision{create: 2},
		},
		"retries spent: Rejected": {
			st:   pending("ProvisioningRequest wl-prov-2 created: waiting for the cluster autoscaler"),
			at:   attempts{last: request("wl-prov-3", cond{"Failed", "True", "no capacity", failedAt}), n: 3},
			want: decision{state: strata.CheckStateRejected, message: "ProvisioningRequest wl-prov-3 failed: no capacity; no retries left (backoffLimitCount 2)"},
		},
		"Ready, booking expired before the admission: Retry": {
			st: ready, at: attempts{last: request("wl-prov-1", cond{"Provisioned", "True", "", now}, cond{"BookingExpired", "True", "expired", now}), n: 1},
			want: decision{state: strata.CheckStateRetry, message: "ProvisioningRequest wl-prov-1: booking expired before the workload was admitted: expired; retry 1 of 2"},
		},
		"Ready, booking expired after the admission: nothing": {
			st: ready, admitted: true, at: attempts{last: request("wl-prov-1", cond{"Provisioned", "True", "", now}, cond{"BookingExpired", "True", "expired", now}), n: 1},
		},
		"capacity revoked: Rejected": {
			st: ready, admitted: true, at: attempts{last: request("wl-prov-1", cond{"Provisioned", "True", "", now}, cond{"CapacityRevoked", "True", "zone drained", now}), n: 1},
			want: decision{state: strata.CheckStateRejected, message: "ProvisioningRequest wl-prov-1: capacity revoked: zone drained", revoked: true},
		},
		"capacity revoked for an earlier reservation: a new attempt": {
			st: pending("ProvisioningRequest wl-prov-1 is Provisioned"), at: attempts{last: request("wl-prov-1", cond{"Provisioned", "True", "", now}, cond{"CapacityRevoked", "True", "", now}), n: 1},
			want: decision{create: 2},
		},
		"booking expired once provisioned, acted on: the next attempt after the base delay": {
			st: pending("ProvisioningRequest wl-prov-1: booking expired before the workload was admitted: expired; retry 1 of 2"),
			at: attempts{last: request("wl-prov-1", cond{"Provisioned", "True", "", failedAt}, cond{"BookingExpired", "True", "expired", failedAt}), n: 1},
			want: decision{state: strata.CheckStatePending, after: 30 * time.Second,
				message: "ProvisioningRequest wl-prov-1: booking expired before the workload was admitted: expired; attempt 2 is made at 2026-12-06T12:00:30Z"},
		},
		// Kueue counts attempts: bookings that expired once provisioned,
		// before the admission, spend the retries too.
		"booking expired once provisioned, retries spent: Rejected": {
			st: ready, at: attempts{last: request("wl-prov-3", cond{"Provisioned", "True", "", now}, cond{"BookingExpired", "True", "expired", now}), n: 3},
			want: decision{state: strata.CheckStateRejected, message: "ProvisioningRequest wl-prov-3: booking expired before the workload was admitted: expired; no retries left (backoffLimitCount 2)"},
		},
		"Retry: the admissionchecks controller acts": {
			st: &strata.AdmissionCheckState{Name: "prov", State: strata.CheckStateRetry}, at: attempts{last: request("wl-prov-1", cond{"Failed", "True", "", now}), n: 1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := decide(tc.st, tc.at, rs, tc.admitted, now)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(decision{})); diff != "" {
				t.Errorf("decide() (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestUpdates(t *testing.T) {
	cfg := &strata.ProvisioningRequestConfig{Spec: strata.ProvisioningRequestConfigSpec{
		ProvisioningClassName: "queued-provisioning.gke.io",
		PodSetUpdates: &strata.ProvisioningRequestPodSetUpdates{NodeSelector: []strata.ProvisioningRequestPodSetUpdatesNodeSelector{
			{Key: "cloud.google.com/gke-nodepool", ValueFromProvisioningClassDetail: "NodePoolName"},
			{Key: "absent", ValueFromProvisioningClassDetail: "NotThere"},
		}},
	}}
	pr := request("wl-prov-1")
	_ = unstructured.SetNestedStringMap(pr.Object, map[string]string{"NodePoolName": "pool-a"}, "status", "provisioningClassDetails")
	got := updates(cfg, pr, []string{"main"})
	want := []strata.PodSetUpdate{{Name: "main",
		Annotations: map[string]string{
			ConsumesAnnotation: "wl-prov-1", ClassAnnotation: "queued-provisioning.gke.io",
			legacyConsumesAnnotation: "wl-prov-1", legacyClassAnnotation: "queued-provisioning.gke.io",
		},
		NodeSelector: map[string]string{"cloud.google.com/gke-nodepool": "pool-a"},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("updates() (-want,+got):\n%s", diff)
	}
}

func TestManaged(t *testing.T) {
	ps := func(name string, count int32, resource string) strata.PodSet {
		return strata.PodSet{Name: name, Count: count, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceName(resource): {}}},
		}}}}}
	}
	wl := &strata.Workload{Spec: strata.WorkloadSpec{PodSets: []strata.PodSet{ps("launcher", 1, "cpu"), ps("workers", 4, "nvidia.com/gpu"), ps("none", 0, "nvidia.com/gpu")}}}
	wl.Status.Admission = &strata.Admission{PodSetAssignments: []strata.PodSetAssignment{{Name: "launcher", Count: 1}, {Name: "workers", Count: 4}, {Name: "none", Count: 0}}}
	cases := map[string]struct {
		resources []corev1.ResourceName
		want      []string
	}{
		"every pod set with pods":       {want: []string{"launcher", "workers"}},
		"only those requesting the GPU": {resources: []corev1.ResourceName{"nvidia.com/gpu"}, want: []string{"workers"}},
		"none":                          {resources: []corev1.ResourceName{"example.com/fpga"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := managed(wl, &strata.ProvisioningRequestConfig{Spec: strata.ProvisioningRequestConfigSpec{ManagedResources: tc.resources}})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("managed() (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestRequestName(t *testing.T) {
	long := strings.Repeat("a", 300)
	if got := RequestName("wl", "prov", 2); got != "wl-prov-2" {
		t.Errorf("RequestName() = %q", got)
	}
	got := RequestName(long, "prov", 1)
	if len(got) != 253 || got == RequestName(long, "prov", 2) {
		t.Errorf("RequestName(long) = %q (%d characters); want 253, distinct per attempt", got, len(got))
	}
}

// TestAlike: which pod sets go into one PodTemplate under each
// podSetMergePolicy.
func TestAlike(t *testing.T) {
	tpl := func(image, gpus string, configure func(*corev1.PodSpec)) *corev1.PodTemplateSpec {
		s := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"pool": "gpu"},
			Containers: []corev1.Container{{Name: "c", Image: image, Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(gpus)}}}},
		}}
		if configure != nil {
			configure(&s.Spec)
		}
		return s
	}
	identical := strata.IdenticalPodTemplates
	scheduling := strata.IdenticalWorkloadSchedulingRequirements
	cases := map[string]struct {
		policy *strata.PodSetMergePolicy
		a, b   *corev1.PodTemplateSpec
		want   bool
	}{
		"no policy: never, even identical":            {a: tpl("x", "8", nil), b: tpl("x", "8", nil)},
		"identical templates":                         {policy: &identical, a: tpl("x", "8", nil), b: tpl("x", "8", nil), want: true},
		"identical templates: another image is not":   {policy: &identical, a: tpl("x", "8", nil), b: tpl("y", "8", nil)},
		"scheduling requirements: another image is":   {policy: &scheduling, a: tpl("x", "8", nil), b: tpl("y", "8", nil), want: true},
		"scheduling requirements: other requests not": {policy: &scheduling, a: tpl("x", "8", nil), b: tpl("x", "4", nil)},
		"scheduling requirements: another selector not": {policy: &scheduling, a: tpl("x", "8", nil),
			b: tpl("x", "8", func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"pool": "cpu"} })},
		"scheduling requirements: a toleration not": {policy: &scheduling, a: tpl("x", "8", nil),
			b: tpl("x", "8", func(s *corev1.PodSpec) {
				s.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
			})},
		"scheduling requirements: a command is": {policy: &scheduling, a: tpl("x", "8", nil),
			b: tpl("x", "8", func(s *corev1.PodSpec) { s.Containers[0].Command = []string{"train"} }), want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := alike(tc.policy, tc.a, tc.b); got != tc.want {
				t.Errorf("alike = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestParameters: a request's parameters are the config's, and the
// workload's provreq.kueue.x-k8s.io/ annotations over them.
func TestParameters(t *testing.T) {
	cfg := &strata.ProvisioningRequestConfig{Spec: strata.ProvisioningRequestConfigSpec{Parameters: map[string]string{"ValidUntilSeconds": "600", "Other": "a"}}}
	wl := &strata.Workload{}
	wl.Annotations = map[string]string{"provreq.kueue.x-k8s.io/ValidUntilSeconds": "60", "provreq.kueue.x-k8s.io/Extra": "b",
		"provreq.kueue.x-k8s.io/": "ignored", "example.com/ValidUntilSeconds": "1"}
	want := map[string]string{"ValidUntilSeconds": "60", "Other": "a", "Extra": "b"}
	if diff := cmp.Diff(want, parameters(cfg, wl)); diff != "" {
		t.Errorf("parameters (-want,+got):\n%s", diff)
	}
	if got := parameters(&strata.ProvisioningRequestConfig{}, &strata.Workload{}); got != nil {
		t.Errorf("parameters of neither = %v, want none", got)
	}
}

// TestAttemptOf: which attempt of a check a workload's request is, from
// its annotations or, made before they were written, its name.
func TestAttemptOf(t *testing.T) {
	pr := func(name string, annotations map[string]string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetName(name)
		u.SetAnnotations(annotations)
		return u
	}
	long := strings.Repeat("w", 250)
	cases := map[string]struct {
		pr   *unstructured.Unstructured
		want int
	}{
		"annotated":                     {pr: pr("wl-prov-3", map[string]string{checkAnnotation: "prov", attemptAnnotation: "3"}), want: 3},
		"annotated for another check":   {pr: pr("wl-prov-3", map[string]string{checkAnnotation: "other", attemptAnnotation: "3"})},
		"annotated, attempt malformed":  {pr: pr("wl-prov-3", map[string]string{checkAnnotation: "prov", attemptAnnotation: "x"})},
		"by name":                       {pr: pr("wl-prov-2", nil), want: 2},
		"by name, another check's":      {pr: pr("wl-prov-extra-2", nil)},
		"by name, not an attempt":       {pr: pr("wl-prov-x", nil)},
		"a long name, cut and hashed":   {pr: pr(RequestName(long, "prov", 4), map[string]string{checkAnnotation: "prov", attemptAnnotation: "4"}), want: 4},
		"a long name without its notes": {pr: pr(RequestName(long, "prov", 4), nil)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wl := "wl"
			if strings.HasPrefix(tc.pr.GetName(), "www") {
				wl = long
			}
			if got := attemptOf(tc.pr, wl, "prov"); got != tc.want {
				t.Errorf("attemptOf() = %d, want %d", got, tc.want)
			}
		})
	}
}
