package dispatch

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "strata.dev/strata/api/v1beta1"
)

// FuzzCopyOf: a Job's dispatch labels, whatever a worker holds in them,
// are read as a dispatch or refused, never a panic; a dispatch read gives
// back its key.
func FuzzCopyOf(f *testing.F) {
	f.Add("3f0c6a9e-uid", "2")
	f.Add("", "1")
	f.Add("uid", "-9223372036854775808")
	f.Add("uid", "99999999999999999999")
	f.Fuzz(func(t *testing.T, uid, gen string) {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{strata.HubWorkloadUIDLabel: uid, strata.DispatchGenerationLabel: gen}}}
		u, g, ok := CopyOf(j)
		if !ok {
			return
		}
		if string(u) != uid || Key(u, g) == "" {
			t.Fatalf("CopyOf(%q, %q) = %q, %d", uid, gen, u, g)
		}
	})
}
