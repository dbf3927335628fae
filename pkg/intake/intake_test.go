package intake

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs/batchjob"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/testutil"
	"strata.dev/strata/pkg/workload"
)

const (
	ns        = "ml"
	queueName = "training"
)

func TestDesiredWorkload(t *testing.T) {
	rack := "cloud.provider.com/topology-rack"
	cases := map[string]struct {
		annotations map[string]string
		partial     bool // topologyAwareScheduling.partialSlices
		wantReq     *strata.PodSetTopologyRequest
		wantErr     string
	}{
		"valid": {
			annotations: map[string]string{"strata.dev/podset-required-topology": rack},
			wantReq:     &strata.PodSetTopologyRequest{Required: ptr.To(rack)},
		},
		"required and preferred": {
			annotations: map[string]string{"strata.dev/podset-required-topology": rack, "strata.dev/podset-preferred-topology": rack},
			wantErr:     "only one of",
		},
		"slice level with a bad size": {
			annotations: map[string]string{"strata.dev/podset-required-topology": rack, "strata.dev/podset-slice-required-topology": rack, "strata.dev/podset-slice-size": "-1"},
			wantErr:     "must be a whole number of pods",
		},
		"constraints and a slice level": {
			annotations: map[string]string{"strata.dev/podset-required-topology": rack, "strata.dev/podset-slice-required-topology": rack, "strata.dev/podset-slice-size": "2",
				"strata.dev/podset-slice-required-topology-constraints": `[{"topology": "kubernetes.io/hostname", "size": "2"}]`},
			wantErr: "cannot be combined",
		},
		"four layers": {
			annotations: map[string]string{"strata.dev/podset-required-topology": "a",
				"strata.dev/podset-slice-required-topology-constraints": `[{"topology":"a","size":4},{"topology":"b","size":4},{"topology":"c","size":2},{"topology":"d","size":1}]`},
			wantErr: "must have 1 to 3 layers",
		},
		"duplicate layers": {
			annotations: map[string]string{"strata.dev/podset-required-topology": "a",
				"strata.dev/podset-slice-required-topology-constraints": `[{"topology":"b","size":2},{"topology":"b","size":2}]`},
			wantErr: "each level may appear in one layer only",
		},
		"layer size beyond 32 bits": {
			annotations: map[string]string{"strata.dev/podset-required-topology": "a",
				"strata.dev/podset-slice-required-topology-constraints": `[{"topology":"b","size":4294967296}]`},
			wantErr: "at most 2147483647",
		},
		"empty group name": {
			annotations: map[string]string{"strata.dev/podset-required-topology": rack, "strata.dev/podset-group-name": ""},
			wantErr:     "must be 1 to 63 characters",
		},
		"group name of 64 characters": {
			annotations: map[string]string{"strata.dev/podset-required-topology": rack, "strata.dev/podset-group-name": strings.Repeat("g", 64)},
			wantErr:     "must be 1 to 63 characters",
		},
		// 4 pods (makeJob) in slices of 3.
		"a slice size that does not divide the pod count (KEP-2724)": {
			annotations: map[string]string{"strata.dev/podset-required-topology": rack, "strata.dev/podset-slice-required-topology": "kubernetes.io/hostname", "strata.dev/podset-slice-size": "3"},
			wantErr:     `spec.template.metadata.annotations[strata.dev/podset-slice-size]: Invalid value: "3": the slice size 3 must evenly divide the pod count 4 (KEP-2724)`,
		},
		"a slice size that does not divide the pod count, with partial slices": {
			annotations: map[string]string{"strata.dev/podset-required-topology": rack, "kueue.x-k8s.io/podset-slice-required-topology": "kubernetes.io/hostname", "kueue.x-k8s.io/podset-slice-size": "3"},
			partial:     true,
			wantReq: &strata.PodSetTopologyRequest{Required: ptr.To(rack), PodSetSliceRequiredTopology: ptr.To("kubernetes.io/hostname"),
				PodSetSliceSize: ptr.To[int32](3)},
		},
		"one layer that does not divide the pod count (KEP-2724)": {
			annotations: map[string]string{"strata.dev/podset-required-topology": rack,
				"strata.dev/podset-slice-required-topology-constraints": `[{"topology":"kubernetes.io/hostname","size":3}]`},
			wantErr: "the slice size 3 must evenly divide the pod count 4 (KEP-2724)",
		},
		"one layer that does not divide the pod count, with partial slices": {
			annotations: map[string]string{"strata.dev/podset-required-topology": rack,
				"strata.dev/podset-slice-required-topology-constraints": `[{"topology":"kubernetes.io/hostname","size":3}]`},
			partial: true,
			wantReq: &strata.PodSetTopologyRequest{Required: ptr.To(rack),
				PodSetSliceRequiredTopologyConstraints: []strata.PodSetSliceTopologyConstraint{{Topology: "kubernetes.io/hostname", Size: 3}}},
		},
		"two layers, the first not dividing the pod count, even with partial slices": {
			annotations: map[string]string{"strata.dev/podset-required-topology": "a",
				"strata.dev/podset-slice-required-topology-constraints": `[{"topology":"b","size":3},{"topology":"c","size":1}]`},
			partial: true,
			wantErr: "layer 0: size 3 must evenly divide the pod count 4 when more than one layer is given",
		},
		"group without a level": {
			annotations: map[string]string{"strata.dev/podset-group-name": "g"},
			wantErr:     `pod set group "g" needs podset-required-topology or podset-preferred-topology`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wl, errs := DesiredWorkload(batchjob.Adapt(makeJob("train", tc.annotations)), tas.Options{PartialSlices: tc.partial})
			if got := errs.ToAggregate(); (got == nil) != (tc.wantErr == "") || (got != nil && !strings.Contains(got.Error(), tc.wantErr)) {
				t.Errorf("errors = %v, want one containing %q", got, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantReq, wl.Spec.PodSets[0].TopologyRequest); diff != "" {
				t.Errorf("topology request (-want,+got):\n%s", diff)
			}
			// The Workload of every Job, valid or not, passes the schema:
			// the API server accepts it, and with it the Invalid condition.
			if diff := cmp.Diff(field.ErrorList(nil), workload.ValidateSpec(&wl.Spec, field.NewPath("spec"))); diff != "" {
				t.Errorf("ValidateSpec() (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	cases := map[string]struct {
		s    string
		n    int
		want string
	}{
		"short":              {s: "abc", n: 10, want: "abc"},
		"exact":              {s: "abcdefghij", n: 10, want: "abcdefghij"},
		"cut":                {s: "abcdefghijk", n: 10, want: "abcdef ..."},
		"cut before a rune":  {s: "abcde€fghij", n: 10, want: "abcde ..."},
		"cut after the rune": {s: "ab€cdefghij", n: 10, want: "ab€c ..."},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Truncate(tc.s, tc.n)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Truncate() (-want,+got):\n%s", diff)
			}
			if len(got) > tc.n || !utf8.ValidString(got) {
				t.Errorf("Truncate() = %q: %d bytes, valid UTF-8 %v", got, len(got), utf8.ValidString(got))
			}
		})
	}
}

// makeJob is a Job of 4 pods in queue training, suspended as the admission
// policy leaves it.
func makeJob(name string, annotations map[string]string) *batchv1.Job {
	return testutil.MakeJob(name, ns).UID(name + "-uid").Queue(queueName).Parallelism(4).Completions(4).Suspend(true).
		RestartPolicy("").PodAnnotations(annotations).Obj()
}
