package dispatch

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	strata "strata.dev/strata/api/v1beta1"
)

func TestSigned(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	jobKind := schema.GroupKind{Group: "batch", Kind: "Job"}
	signedCopy := func() *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", Labels: map[string]string{
			strata.OriginLabel: "hub", strata.HubWorkloadUIDLabel: "u1", strata.DispatchGenerationLabel: "2",
		}}}
		Sign(key, jobKind, j)
		return j
	}
	cases := map[string]struct {
		change func(*batchv1.Job)
		key    []byte
		kind   schema.GroupKind
		want   bool
	}{
		"as signed":                {want: true},
		"another key":              {key: []byte("fedcba9876543210fedcba9876543210"), want: false},
		"no key":                   {key: []byte{}, want: false},
		"read as another kind":     {kind: schema.GroupKind{Group: "jobset.x-k8s.io", Kind: "JobSet"}, want: false},
		"no signature":             {change: func(j *batchv1.Job) { delete(j.Annotations, strata.CopySignatureAnnotation) }},
		"another name":             {change: func(j *batchv1.Job) { j.Name = "other" }},
		"another namespace":        {change: func(j *batchv1.Job) { j.Namespace = "team-b" }},
		"another hub Workload UID": {change: func(j *batchv1.Job) { j.Labels[strata.HubWorkloadUIDLabel] = "u2" }},
		"another generation":       {change: func(j *batchv1.Job) { j.Labels[strata.DispatchGenerationLabel] = "3" }},
		"another origin":           {change: func(j *batchv1.Job) { j.Labels[strata.OriginLabel] = "other-hub" }},
		"a forged signature":       {change: func(j *batchv1.Job) { j.Annotations[strata.CopySignatureAnnotation] = "AAAA" }},
		"other labels changed": {want: true, change: func(j *batchv1.Job) {
			j.Labels["team"] = "a"
			j.Annotations["note"] = "x"
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			j := signedCopy()
			if tc.change != nil {
				tc.change(j)
			}
			k, gk := key, jobKind
			if tc.key != nil {
				k = tc.key
			}
			if !tc.kind.Empty() {
				gk = tc.kind
			}
			if got := Signed(k, gk, j); got != tc.want {
				t.Errorf("Signed() = %t, want %t", got, tc.want)
			}
		})
	}
}
