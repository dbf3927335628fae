package copies

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/hub/dispatch"
	"strata.dev/strata/hub/fleet"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/jobs/batchjob"
	"strata.dev/strata/pkg/scheme"
)

func TestOrphaned(t *testing.T) {
	copyOf := func(uid, gen string) *batchv1.Job {
		labels := map[string]string{strata.OriginLabel: "hub"}
		if uid != "" {
			labels[strata.HubWorkloadUIDLabel] = uid
			labels[strata.DispatchGenerationLabel] = gen
		}
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", Labels: labels}}
	}
	hubWL := func(uid, cluster string, gen int64) *strata.Workload {
		return &strata.Workload{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}, Status: strata.WorkloadStatus{
			Placement: &strata.Placement{Cluster: cluster, DispatchGeneration: gen},
		}}
	}
	cases := map[string]struct {
		copy *batchv1.Job
		wl   *strata.Workload
		want bool
	}{
		"the current dispatch":                      {copyOf("u1", "2"), hubWL("u1", "w1", 2), false},
		"no hub Workload":                           {copyOf("u1", "2"), nil, true},
		"another Workload of the name":              {copyOf("u0", "1"), hubWL("u1", "w1", 1), true},
		"no dispatch labels":                        {copyOf("", ""), hubWL("u1", "w1", 1), true},
		"an earlier dispatch":                       {copyOf("u1", "1"), hubWL("u1", "w1", 2), true},
		"the dispatch moved to another worker":      {copyOf("u1", "2"), hubWL("u1", "w2", 2), true},
		"the dispatch was undone":                   {copyOf("u1", "2"), hubWL("u1", "", 2), true},
		"a dispatch the informer does not show yet": {copyOf("u1", "3"), hubWL("u1", "", 2), false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Orphaned(tc.copy, "w1", tc.wl); got != tc.want {
				t.Errorf("Orphaned() = %t, want %t", got, tc.want)
			}
		})
	}
}

func TestMade(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	gk := schema.GroupKind{Group: "batch", Kind: "Job"}
	copyOf := func(uid string, signed bool) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", Labels: map[string]string{
			strata.OriginLabel: "hub", strata.HubWorkloadUIDLabel: uid, strata.DispatchGenerationLabel: "1",
		}}}
		if signed {
			dispatch.Sign(key, gk, j)
		}
		return j
	}
	hubWL := &strata.Workload{ObjectMeta: metav1.ObjectMeta{UID: "u1"}}
	cases := map[string]struct {
		copy *batchv1.Job
		key  []byte
		wl   *strata.Workload
		want bool
	}{
		"signed, its Workload gone":               {copy: copyOf("u0", true), key: key, want: true},
		"signed, another Workload of its name":    {copy: copyOf("u0", true), key: key, wl: hubWL, want: true},
		"unsigned, a copy of the Workload":        {copy: copyOf("u1", false), key: key, wl: hubWL, want: true},
		"unsigned, no Workload of its name":       {copy: copyOf("u1", false), key: key},
		"unsigned, another Workload of its name":  {copy: copyOf("u0", false), key: key, wl: hubWL},
		"signed, the key unreadable":              {copy: copyOf("u0", true)},
		"the key unreadable, the records name it": {copy: copyOf("u1", true), wl: hubWL, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Made(tc.key, gk, tc.copy, tc.wl); got != tc.want {
				t.Errorf("Made() = %t, want %t", got, tc.want)
			}
		})
	}
}

// TestMoved: of the dispatches found on a worker by their Workloads only
// (a copy whose Job a tenant relabelled), those a hub Workload no longer
// places there are revoked; a newer dispatch than the hub shows, one of
// no hub Workload (a tenant's forgery) and a malformed key are not.
func TestMoved(t *testing.T) {
	placed := func(uid types.UID, cluster string, gen int64) *strata.Workload {
		wl := &strata.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "wl-" + string(uid), UID: uid},
			Status: strata.WorkloadStatus{Placement: &strata.Placement{Cluster: cluster, Flavor: "f", DispatchGeneration: gen}}}
		return wl
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(
		placed("u1", "w1", 2), placed("u2", "w2", 1), placed("u3", "", 3)).Build()
	o := &OrphanCollector{client: c}
	got, err := o.moved(context.Background(), "w1", []string{"u1/2", "u1/1", "u2/1", "u3/3", "u3/4", "u9/1", "garbage", "u1/x"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"u1/1", "u2/1", "u3/3"}, got); diff != "" {
		t.Errorf("moved (-want,+got):\n%s", diff)
	}
}

// TestCollectVerifiesTheCluster: the sweep removes an orphan only once
// the worker's address is confirmed to reach the cluster the hub
// dispatched to, checked once per sweep, and removes nothing when it
// reaches another (a repointed name would make every copy there look
// like this worker's orphan).
func TestCollectVerifiesTheCluster(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	orphan := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", UID: "c1", Labels: map[string]string{
		strata.OriginLabel: "hub", strata.HubWorkloadUIDLabel: "u1", strata.DispatchGenerationLabel: "1",
	}}}
	dispatch.Sign(key, schema.GroupKind{Group: "batch", Kind: "Job"}, orphan)
	second := orphan.DeepCopy()
	second.Name, second.UID = "eval", "c2"
	dispatch.Sign(key, schema.GroupKind{Group: "batch", Kind: "Job"}, second)
	var copies []jobs.Job
	for _, j := range []*batchv1.Job{orphan, second} {
		cp, ok := jobs.AdaptAny([]jobs.Kind{batchjob.Kind}, j)
		if !ok {
			t.Fatal("not a Job")
		}
		copies = append(copies, cp)
	}
	for name, tc := range map[string]struct {
		verified    error
		wantRemoved []string
		wantErr     error
	}{
		"the cluster dispatched to": {wantRemoved: []string{"train", "eval"}},
		"another cluster":           {verified: fleet.ErrClusterChanged, wantErr: fleet.ErrClusterChanged},
	} {
		t.Run(name, func(t *testing.T) {
			var removed []string
			checks := 0
			o := &OrphanCollector{
				client:  fake.NewClientBuilder().WithScheme(scheme.New()).Build(), // no hub Workloads: both orphans
				signing: &signingKey{key: key},
				remove: func(_ context.Context, _ string, cp client.Object) error {
					removed = append(removed, cp.GetName())
					return nil
				},
			}
			verify := func() error { checks++; return tc.verified }
			n, err := o.collect(context.Background(), "w1", 0, copies, verify, nil)
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("collect: %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantRemoved, removed); diff != "" || n != len(tc.wantRemoved) {
				t.Errorf("removed %d (-want,+got):\n%s", n, diff)
			}
			if checks == 0 {
				t.Error("removed without checking the cluster")
			}
		})
	}
}
