package cmdutil

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestAPIWatch: the watch returns ErrNewAPI, naming the kind, once one of
// the kinds missing at start is served; it asks again after an error,
// and returns nil when nothing is missing or its context ends.
func TestAPIWatch(t *testing.T) {
	pr := schema.GroupVersionKind{Group: "autoscaling.x-k8s.io", Version: "v1", Kind: "ProvisioningRequest"}
	js := schema.GroupVersionKind{Group: "jobset.x-k8s.io", Version: "v1alpha2", Kind: "JobSet"}
	flaky := errors.New("the API server does not answer")
	cases := map[string]struct {
		missing []schema.GroupVersionKind
		// answers are what each ask says of each kind, in turn: the
		// last one stands.
		answers []map[schema.GroupVersionKind]error
		served  schema.GroupVersionKind
		want    error
	}{
		"nothing missing": {},
		"served on the third ask": {missing: []schema.GroupVersionKind{pr, js},
			answers: []map[schema.GroupVersionKind]error{{}, {}, {js: nil}}, served: js, want: ErrNewAPI},
		"asked again after an error": {missing: []schema.GroupVersionKind{pr},
			answers: []map[schema.GroupVersionKind]error{{pr: flaky}, {pr: flaky}, {pr: nil}}, served: pr, want: ErrNewAPI},
		"never served: runs until its context ends": {missing: []schema.GroupVersionKind{pr}, answers: []map[schema.GroupVersionKind]error{{}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			asks := 0
			w := &APIWatch{missing: tc.missing, interval: time.Millisecond, served: func(gvk schema.GroupVersionKind) (bool, error) {
				a := tc.answers[min(asks/len(tc.missing), len(tc.answers)-1)]
				asks++
				err, ok := a[gvk]
				if !ok {
					return false, nil
				}
				return err == nil, err
			}}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			err := w.Start(ctx)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Start() = %v, want %v", err, tc.want)
			}
			if tc.want != nil && err.Error() != ErrNewAPI.Error()+": "+tc.served.String() {
				t.Errorf("Start() = %q, want it to name %s", err, tc.served)
			}
			if got := Restartable(err); got != nil {
				t.Errorf("Restartable(%v) = %v, want nil", err, got)
			}
		})
	}
	if err := Restartable(flaky); !errors.Is(err, flaky) {
		t.Errorf("Restartable(%v) = %v, want it kept", flaky, err)
	}
}
