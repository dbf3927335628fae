package workercluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	ocmclusterv1 "open-cluster-management.io/api/cluster/v1"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"

	"strata.dev/strata/pkg/testutil"
)

func TestPublishedFor(t *testing.T) {
	cases := map[string]struct {
		profile *inventoryv1alpha1.ClusterProfile
		want    bool
	}{
		"OCM's, labelled with the cluster": {
			profile: testutil.MakeClusterProfile("strata-system", "mc").Manager("open-cluster-management").Label(ocmclusterv1.ClusterNameLabelKey, "mc").Obj(),
			want:    true,
		},
		"OCM's, without the cluster label (OCM before ManagedClusterSetBinding scoping)": {
			profile: testutil.MakeClusterProfile("strata-system", "mc").Manager("open-cluster-management").Obj(),
			want:    true,
		},
		"OCM's, labelled with another cluster": {
			profile: testutil.MakeClusterProfile("strata-system", "mc").Manager("open-cluster-management").Label(ocmclusterv1.ClusterNameLabelKey, "other").Obj(),
		},
		"another cluster manager's": {
			profile: testutil.MakeClusterProfile("strata-system", "mc").Manager("fleet").Label(ocmclusterv1.ClusterNameLabelKey, "mc").Obj(),
		},
		"of another name": {
			profile: testutil.MakeClusterProfile("strata-system", "mc-2").Manager("open-cluster-management").Obj(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := publishedFor(tc.profile, "mc"); got != tc.want {
				t.Errorf("publishedFor() = %t, want %t", got, tc.want)
			}
		})
	}
}

func TestTokenCredential(t *testing.T) {
	ca := []byte("-----BEGIN CERTIFICATE-----")
	cc := ocmclusterv1.ClientConfig{URL: "https://mc.example:6443", CABundle: ca}
	cred, f := tokenCredential(cc, testutil.MakeTokenSecret("mc", "strata-hub", "t0ken"))
	if f != nil {
		t.Fatalf("tokenCredential(): %s", f.message)
	}
	type got struct {
		Host, Token, Via string
		CA               []byte
	}
	want := got{Host: "https://mc.example:6443", Token: "t0ken", CA: ca, Via: "ManagedServiceAccount token Secret mc/strata-hub"}
	if diff := cmp.Diff(want, got{Host: cred.config.Host, Token: cred.config.BearerToken, Via: cred.via, CA: cred.config.CAData}); diff != "" {
		t.Errorf("tokenCredential() (-want,+got):\n%s", diff)
	}

	rotated, _ := tokenCredential(cc, testutil.MakeTokenSecret("mc", "strata-hub", "t0ken-2"))
	if rotated.identity == cred.identity {
		t.Error("a rotated token keeps the identity: the hub would not reconnect with it")
	}
	moved, _ := tokenCredential(ocmclusterv1.ClientConfig{URL: "https://mc-2.example:6443", CABundle: ca}, testutil.MakeTokenSecret("mc", "strata-hub", "t0ken"))
	if moved.identity == cred.identity {
		t.Error("another URL keeps the identity: the hub would not reconnect there")
	}

	_, f = tokenCredential(cc, testutil.MakeTokenSecret("mc", "strata-hub", ""))
	wantFailure := &failure{reason: ReasonInvalidTokenSecret, message: "Secret mc/strata-hub has no token: is the ManagedServiceAccount's token reported yet?"}
	if diff := cmp.Diff(wantFailure, f, cmp.AllowUnexported(failure{})); diff != "" {
		t.Errorf("tokenCredential(no token) (-want,+got):\n%s", diff)
	}
}
