package workercluster

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	"strata.dev/strata/pkg/scheme"
	"strata.dev/strata/pkg/testutil"
)

// builderIndexer adds indexes to a fake client's builder.
type builderIndexer struct{ *fake.ClientBuilder }

func (b builderIndexer) IndexField(_ context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	b.WithIndex(obj, field, extract)
	return nil
}

func TestSourceToWorkerClusters(t *testing.T) {
	b := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(
		testutil.MakeWorkerCluster("by-profile").ClusterProfile("fleet", "w1").Obj(),
		testutil.MakeWorkerCluster("by-profile-too").ClusterProfile("fleet", "w1").Obj(),
		testutil.MakeWorkerCluster("other-profile").ClusterProfile("fleet", "w2").Obj(),
		testutil.MakeWorkerCluster("by-managed-cluster").ManagedCluster("w1").Obj(),
		testutil.MakeWorkerCluster("by-secret").KubeConfigSecret("strata-system", "w1").Obj(),
	)
	if err := SetupIndexes(t.Context(), builderIndexer{b}); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{client: b.Build(), managedCluster: configv1beta1.ManagedCluster{ClusterProfileNamespace: "strata-system"}}
	names := func(reqs []reconcile.Request) []string {
		var n []string
		for _, req := range reqs {
			n = append(n, req.Name)
		}
		return n
	}
	sorted := cmpopts.SortSlices(func(a, b string) bool { return a < b })
	cases := map[string]struct {
		got  []reconcile.Request
		want []string
	}{
		"a referenced ClusterProfile": {
			got:  r.profileToWorkerClusters(t.Context(), testutil.MakeClusterProfile("fleet", "w1").Obj()),
			want: []string{"by-profile", "by-profile-too"},
		},
		"a ClusterProfile where OCM publishes": {
			got:  r.profileToWorkerClusters(t.Context(), testutil.MakeClusterProfile("strata-system", "w1").Obj()),
			want: []string{"by-managed-cluster"},
		},
		"a ClusterProfile nothing references": {
			got: r.profileToWorkerClusters(t.Context(), testutil.MakeClusterProfile("fleet", "w3").Obj()),
		},
		"a ManagedCluster": {
			got:  r.managedClusterToWorkerClusters(t.Context(), testutil.MakeManagedCluster("w1").Obj()),
			want: []string{"by-managed-cluster"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, names(tc.got), sorted, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("mapped WorkerClusters (-want,+got):\n%s", diff)
			}
		})
	}
}
