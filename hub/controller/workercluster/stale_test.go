package workercluster

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestIgnoreStale(t *testing.T) {
	gr := schema.GroupResource{Group: "strata.dev", Resource: "workerclusters"}
	down := errors.New("connection refused")
	for name, tc := range map[string]struct {
		err  error
		want error
	}{
		"written":                     {},
		"changed since it was read":   {err: apierrors.NewConflict(gr, "w1", errors.New("the object has been modified"))},
		"deleted since it was read":   {err: apierrors.NewNotFound(gr, "w1")},
		"the API server is not there": {err: down, want: down},
		"forbidden":                   {err: apierrors.NewForbidden(gr, "w1", errors.New("no")), want: apierrors.NewForbidden(gr, "w1", errors.New("no"))},
	} {
		t.Run(name, func(t *testing.T) {
			got := ignoreStale(tc.err)
			if (got == nil) != (tc.want == nil) || (got != nil && got.Error() != tc.want.Error()) {
				t.Errorf("ignoreStale(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
