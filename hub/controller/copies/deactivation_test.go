package copies

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/dispatch"
)

func TestDeactivatedBy(t *testing.T) {
	limit := outcome{result: strata.PlacementEvicted, reason: dispatch.ReasonDeactivated, cause: strata.RequeuingLimitExceeded,
		message: "the worker deactivated the copy (RequeuingLimitExceeded): exceeded the requeuing limit; the Workload is deactivated"}
	long := limit
	long.message = strings.Repeat("m", 3000)
	withAnnotation := func(v string) *strata.Workload {
		return &strata.Workload{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{strata.DeactivatedByAnnotation: v}}}
	}
	cases := map[string]struct {
		wl       *strata.Workload
		dispatch string
		want     *outcome
	}{
		"no annotation": {wl: &strata.Workload{}, dispatch: "uid/2"},
		"the dispatch it names": {
			wl: withAnnotation(encodeDeactivation("uid/2", limit)), dispatch: "uid/2", want: &limit,
		},
		"an earlier dispatch, recorded since": {
			wl: withAnnotation(encodeDeactivation("uid/1", limit)), dispatch: "uid/2",
		},
		"no current dispatch": {
			wl: withAnnotation(encodeDeactivation("uid/2", limit)), dispatch: "",
		},
		"not JSON": {wl: withAnnotation("RequeuingLimitExceeded"), dispatch: "uid/2"},
		"no cause": {wl: withAnnotation(`{"dispatch":"uid/2"}`), dispatch: "uid/2"},
		"a long message is cut": {
			wl: withAnnotation(encodeDeactivation("uid/2", long)), dispatch: "uid/2",
			want: &outcome{result: long.result, reason: long.reason, cause: long.cause, message: strings.Repeat("m", maxDeactivationMessage-4) + " ..."},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := deactivatedBy(tc.wl, tc.dispatch)
			if tc.want == nil {
				if ok {
					t.Fatalf("deactivatedBy() = %+v, want nothing", got)
				}
				return
			}
			if !ok {
				t.Fatal("deactivatedBy() found nothing")
			}
			if diff := cmp.Diff(*tc.want, got, cmp.AllowUnexported(outcome{})); diff != "" {
				t.Errorf("deactivatedBy() (-want,+got):\n%s", diff)
			}
		})
	}
}
