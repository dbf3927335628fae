package workercluster

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/cluster-inventory-api/pkg/access"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	"strata.dev/strata/pkg/testutil"
)

func provider(name, command string, args ...string) configv1beta1.AccessProvider {
	return configv1beta1.AccessProvider{Name: name, ExecConfig: &clientcmdapi.ExecConfig{
		Command: command, Args: args, APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
	}}
}

func TestProfileCredential(t *testing.T) {
	ca := []byte("-----BEGIN CERTIFICATE-----")
	// got is what the test compares of a credential: the exec plugin it
	// runs and where.
	type got struct {
		Host    string
		CA      []byte
		Command string
		Args    []string
		Via     string
	}
	cases := map[string]struct {
		profile     *inventoryv1alpha1.ClusterProfile
		providers   []configv1beta1.AccessProvider
		want        got
		wantFailure *failure
	}{
		"the hub's first provider the profile offers": {
			profile: testutil.MakeClusterProfile("fleet", "w1").
				AccessProvider("token", "https://a.example", nil).
				AccessProvider("cp-creds", "https://b.example", ca).Obj(),
			providers: []configv1beta1.AccessProvider{provider("kubelogin", "/bin/kubelogin"), provider("cp-creds", "/bin/cp-creds", "-v"), provider("token", "/bin/token")},
			want:      got{Host: "https://b.example", CA: ca, Command: "/bin/cp-creds", Args: []string{"-v"}, Via: "ClusterProfile fleet/w1 (access provider cp-creds)"},
		},
		"a deprecated credential provider": {
			profile: func() *inventoryv1alpha1.ClusterProfile {
				cp := testutil.MakeClusterProfile("fleet", "w1").Obj()
				cp.Status.CredentialProviders = []inventoryv1alpha1.CredentialProvider{{Name: "cp-creds"}}
				cp.Status.CredentialProviders[0].Cluster.Server = "https://old.example"
				return cp
			}(),
			providers: []configv1beta1.AccessProvider{provider("cp-creds", "/bin/cp-creds")},
			want:      got{Host: "https://old.example", Command: "/bin/cp-creds", Via: "ClusterProfile fleet/w1 (access provider cp-creds)"},
		},
		"an access provider overrides a credential provider of its name": {
			profile: func() *inventoryv1alpha1.ClusterProfile {
				cp := testutil.MakeClusterProfile("fleet", "w1").AccessProvider("cp-creds", "https://new.example", nil).Obj()
				cp.Status.CredentialProviders = []inventoryv1alpha1.CredentialProvider{{Name: "cp-creds"}}
				cp.Status.CredentialProviders[0].Cluster.Server = "https://old.example"
				return cp
			}(),
			providers: []configv1beta1.AccessProvider{provider("cp-creds", "/bin/cp-creds")},
			want:      got{Host: "https://new.example", Command: "/bin/cp-creds", Via: "ClusterProfile fleet/w1 (access provider cp-creds)"},
		},
		"arguments the profile adds, when the hub appends them": {
			profile: testutil.MakeClusterProfile("fleet", "w1").AccessProvider("cp-creds", "https://a.example", nil).
				Extension("clusterprofiles.multicluster.x-k8s.io/exec/additional-args", []byte(`["--cluster=w1"]`)).Obj(),
			providers: []configv1beta1.AccessProvider{func() configv1beta1.AccessProvider {
				p := provider("cp-creds", "/bin/cp-creds", "-v")
				p.ProfileSourcedCLIArgsPolicy = access.ProfileSourcedCLIArgsPolicyAppend
				return p
			}()},
			want: got{Host: "https://a.example", Command: "/bin/cp-creds", Args: []string{"-v", "--cluster=w1"}, Via: "ClusterProfile fleet/w1 (access provider cp-creds)"},
		},
		"no access provider at all": {
			profile:   testutil.MakeClusterProfile("fleet", "w1").Obj(),
			providers: []configv1beta1.AccessProvider{provider("cp-creds", "/bin/cp-creds")},
			wantFailure: &failure{reason: ReasonNoAccessProvider,
				message: "ClusterProfile fleet/w1 offers no access provider (status.accessProviders is empty): its cluster manager (test) has not published how to reach the cluster"},
		},
		"a hub without plugins": {
			profile: testutil.MakeClusterProfile("fleet", "w1").AccessProvider("token", "https://a.example", nil).AccessProvider("cp-creds", "https://a.example", nil).Obj(),
			wantFailure: &failure{reason: ReasonAccessProviderNotConfigured,
				message: `ClusterProfile fleet/w1 offers the access providers "cp-creds", "token", none of which the hub has a plugin for: add one to clusterProfile.accessProviders of the hub's configuration (it has none)`},
		},
		"no server": {
			profile:     testutil.MakeClusterProfile("fleet", "w1").AccessProvider("cp-creds", "", nil).Obj(),
			providers:   []configv1beta1.AccessProvider{provider("cp-creds", "/bin/cp-creds")},
			wantFailure: &failure{reason: ReasonInvalidAccessProvider, message: `ClusterProfile fleet/w1: access provider "cp-creds" has no cluster.server`},
		},
		"malformed profile-sourced arguments": {
			profile: testutil.MakeClusterProfile("fleet", "w1").AccessProvider("cp-creds", "https://a.example", nil).
				Extension("clusterprofiles.multicluster.x-k8s.io/exec/additional-args", []byte(`{"cluster":"w1"}`)).Obj(),
			providers: []configv1beta1.AccessProvider{func() configv1beta1.AccessProvider {
				p := provider("cp-creds", "/bin/cp-creds")
				p.ProfileSourcedCLIArgsPolicy = access.ProfileSourcedCLIArgsPolicyAppend
				return p
			}()},
			wantFailure: &failure{reason: ReasonInvalidAccessProvider,
				message: `ClusterProfile fleet/w1, access provider "cp-creds": failed to unmarshal additional CLI args extension: yaml: unmarshal errors:` + "\n" + `  line 1: cannot unmarshal !!map into []string`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before, _ := json.Marshal(tc.providers)
			cred, f := profileCredential(tc.profile, tc.providers)
			if diff := cmp.Diff(tc.wantFailure, f, cmp.AllowUnexported(failure{})); diff != "" {
				t.Fatalf("profileCredential() failure (-want,+got):\n%s", diff)
			}
			if after, _ := json.Marshal(tc.providers); string(before) != string(after) {
				t.Errorf("profileCredential() changed the hub's providers:\n%s\nto\n%s", before, after)
			}
			if f != nil {
				return
			}
			e := cred.config.ExecProvider
			g := got{Host: cred.config.Host, CA: cred.config.CAData, Command: e.Command, Args: e.Args, Via: cred.via}
			if diff := cmp.Diff(tc.want, g); diff != "" {
				t.Errorf("profileCredential() (-want,+got):\n%s", diff)
			}
			if e.InteractiveMode != clientcmdapi.NeverExecInteractiveMode {
				t.Errorf("profileCredential() plugin runs with interactiveMode %q, want Never", e.InteractiveMode)
			}
		})
	}
}

func TestProfileCredentialIdentity(t *testing.T) {
	providers := []configv1beta1.AccessProvider{provider("cp-creds", "/bin/cp-creds")}
	identity := func(cp *inventoryv1alpha1.ClusterProfile, providers []configv1beta1.AccessProvider) string {
		t.Helper()
		cred, f := profileCredential(cp, providers)
		if f != nil {
			t.Fatalf("profileCredential(): %s", f.message)
		}
		return cred.identity
	}
	base := identity(testutil.MakeClusterProfile("fleet", "w1").AccessProvider("cp-creds", "https://a.example", nil).Obj(), providers)
	if again := identity(testutil.MakeClusterProfile("fleet", "w1").AccessProvider("cp-creds", "https://a.example", nil).Obj(), providers); again != base {
		t.Error("the same profile and plugin give another identity: the hub would reconnect for nothing")
	}
	cp := testutil.MakeClusterProfile("fleet", "w1").AccessProvider("cp-creds", "https://a.example", nil).Obj()
	cp.Status.Conditions = nil
	cp.Status.Version.Kubernetes = "v1.37.1"
	if other := identity(cp, providers); other != base {
		t.Error("a profile's version changes the identity: the hub would reconnect for nothing")
	}
	if other := identity(testutil.MakeClusterProfile("fleet", "w1").AccessProvider("cp-creds", "https://b.example", nil).Obj(), providers); other == base {
		t.Error("another server keeps the identity: the hub would not reconnect")
	}
	if other := identity(testutil.MakeClusterProfile("fleet", "w1").AccessProvider("cp-creds", "https://a.example", nil).Obj(),
		[]configv1beta1.AccessProvider{provider("cp-creds", "/bin/cp-creds", "--v2")}); other == base {
		t.Error("another plugin keeps the identity: the hub would not reconnect")
	}
}
