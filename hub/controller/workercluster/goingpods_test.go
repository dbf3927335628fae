package workercluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/jobs/batchjob"
)

func TestGoingCopies(t *testing.T) {
	now := metav1.Now()
	copyOf := func(name, pods string, deleting bool) jobs.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml"}}
		if pods != "" {
			j.Annotations = map[string]string{strata.GoingPodsAnnotation: pods}
		}
		if deleting {
			j.DeletionTimestamp = &now
		}
		c, _ := batchjob.Kind.Adapt(j)
		return c
	}
	cases := map[string]struct {
		copies []jobs.Job
		want   string
	}{
		"none going":              {copies: []jobs.Job{copyOf("a", "", false), copyOf("b", "b-0 (Running, node n1)", false)}},
		"going, no pods reported": {copies: []jobs.Job{copyOf("a", "", true)}},
		"two going": {
			copies: []jobs.Job{copyOf("b", "b-0 (Terminating since T, node n2)", true), copyOf("a", "a-0 (Terminating since T, node n1)", true)},
			want:   ". Waiting for the pods of ml/a: a-0 (Terminating since T, node n1); of ml/b: b-0 (Terminating since T, node n2)",
		},
		"at most 3": {
			copies: []jobs.Job{copyOf("a", "a-0", true), copyOf("b", "b-0", true), copyOf("c", "c-0", true), copyOf("d", "d-0", true), copyOf("e", "e-0", true)},
			want:   ". Waiting for the pods of ml/a: a-0; of ml/b: b-0; of ml/c: c-0; and 2 more copies",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, goingCopies(tc.copies)); diff != "" {
				t.Errorf("goingCopies (-want +got):\n%s", diff)
			}
		})
	}
}
