package workload

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
)

func TestOwnedPods(t *testing.T) {
	ref := func(uid string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: types.UID("uid-" + uid), Controller: ptr.To(true)}}
	}
	pod := func(name string, owners []metav1.OwnerReference) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: owners}}
	}
	pods := []corev1.Pod{
		pod("new", ref("new")),
		pod("earlier", ref("old")), // an earlier Job's, still terminating
		pod("orphaned", nil),       // the earlier Job deleted with --cascade=orphan
		pod("not-controlled", []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "uid-new"}}),
	}
	cases := []struct {
		name   string
		owners []metav1.OwnerReference
		want   []string
	}{
		{name: "the Job's Workload", owners: ref("new"), want: []string{"new"}},
		{name: "a Workload without a controller", want: []string{"new", "earlier", "orphaned", "not-controlled"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wl := &strata.Workload{ObjectMeta: metav1.ObjectMeta{Name: "job-train", OwnerReferences: tc.owners}}
			var got []string
			for _, p := range OwnedPods(wl, pods) {
				got = append(got, p.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("OwnedPods() (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestSameMeaning(t *testing.T) {
	cases := map[string]struct {
		a, b string
		want bool
	}{
		"equal":                {"fits nowhere now", "fits nowhere now", true},
		"numbers differ":       {"rack holds 6 of 8 pods", "rack holds 12 of 8 pods", true},
		"words differ":         {"rack holds 6 of 8 pods", "block holds 6 of 8 pods", false},
		"a number appears":     {"rack holds pods", "rack holds 6 pods", false},
		"separate runs differ": {"1 2", "12", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := SameMeaning(tc.a, tc.b); got != tc.want {
				t.Errorf("SameMeaning(%q, %q) = %t, want %t", tc.a, tc.b, got, tc.want)
			}
		})
	}
}
