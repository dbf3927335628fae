package kubectlstrata

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	strata "strata.dev/strata/api/v1beta1"
)

func TestAPIError(t *testing.T) {
	where := `context "hub" (https://127.0.0.1:6443)`
	noKind := func(kind string) error {
		return &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: strata.GroupVersion.Group, Kind: kind}, SearchedVersions: []string{"v1beta1"}}
	}
	noGroup := &apiutil.ErrResourceDiscoveryFailed{
		strata.GroupVersion: apierrors.NewNotFound(schema.GroupResource{Group: strata.GroupVersion.Group}, ""),
	}
	cases := map[string]struct {
		err            error
		kind, resource string
		want           string
	}{
		"no CapacitySummary CRD": {
			err: noKind("CapacitySummary"), kind: "CapacitySummary", resource: "capacitysummaries",
			want: noStrataCRDs,
		},
		"no strata.dev group at all": {
			err: noGroup, kind: "Workload", resource: "workloads",
			want: noStrataCRDs,
		},
		"a wrapped no-match error": {
			err: fmt.Errorf("listing: %w", noKind("Workload")), kind: "Workload", resource: "workloads",
			want: noStrataCRDs,
		},
		"no WorkerCluster CRD: not a hub": {
			err: noKind("WorkerCluster"), kind: "WorkerCluster", resource: "workerclusters",
			want: notAHub,
		},
		"forbidden": {
			err:  apierrors.NewForbidden(schema.GroupResource{Group: "strata.dev", Resource: "workerclusters"}, "", errors.New("RBAC: access denied")),
			kind: "WorkerCluster", resource: "workerclusters",
			want: `you may not list workerclusters.strata.dev on context "hub" (https://127.0.0.1:6443): ask for read access ` +
				`(workerclusters.strata.dev is forbidden: RBAC: access denied)`,
		},
		"forbidden Jobs": {
			err:  apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "train", errors.New("no")),
			kind: "Job", resource: "jobs",
			want: `you may not list jobs.batch on context "hub" (https://127.0.0.1:6443): ask for read access (jobs.batch "train" is forbidden: no)`,
		},
		"unauthorized": {
			err: apierrors.NewUnauthorized("expired"), kind: "Workload", resource: "workloads",
			want: `the API server at context "hub" (https://127.0.0.1:6443) does not accept your credentials: log in again or pick another --context (expired)`,
		},
		"anything else": {
			err: errors.New("dial tcp 127.0.0.1:6443: connect: connection refused"), kind: "Workload", resource: "workloads",
			want: `reading workloads from context "hub" (https://127.0.0.1:6443): dial tcp 127.0.0.1:6443: connect: connection refused`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := apiError(tc.err, tc.kind, tc.resource, where)
			if diff := cmp.Diff(tc.want, got.Error()); diff != "" {
				t.Errorf("apiError (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestBar(t *testing.T) {
	cases := map[string]struct {
		free, capacity int64
		want           string
	}{
		"all free":               {free: 64, capacity: 64, want: "[##########]"},
		"none free":              {free: 0, capacity: 64, want: "[----------]"},
		"rounded down":           {free: 40, capacity: 64, want: "[######----]"},
		"a little shows":         {free: 1, capacity: 1000, want: "[#---------]"},
		"almost all is not full": {free: 999, capacity: 1000, want: "[#########-]"},
		"no capacity":            {free: 0, capacity: 0, want: "[----------]"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := bar(tc.free, tc.capacity); got != tc.want {
				t.Errorf("bar(%d, %d) = %q, want %q", tc.free, tc.capacity, got, tc.want)
			}
		})
	}
}

func TestWrap(t *testing.T) {
	long := "LocalQueue team-a does not exist in namespace ml on w1: create it there, or set the WorkerCluster's localQueueName"
	want := []string{
		"w1 Dispatching: LocalQueue team-a does not exist in namespace ml on w1: create it there, or set the",
		"    WorkerCluster's localQueueName",
	}
	if diff := cmp.Diff(want, wrap("w1 Dispatching: ", "    ", long)); diff != "" {
		t.Errorf("wrap (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"label:"}, wrap("label: ", "  ", "")); diff != "" {
		t.Errorf("wrap of nothing (-want,+got):\n%s", diff)
	}
}

func TestCheckFormat(t *testing.T) {
	for _, f := range []string{"table", "json", "yaml"} {
		if err := checkFormat(f); err != nil {
			t.Errorf("checkFormat(%q) = %v", f, err)
		}
	}
	if err := checkFormat("xml"); err == nil || err.Error() != `unknown output format "xml" (want one of table, json, yaml)` {
		t.Errorf("checkFormat(xml) = %v", err)
	}
}
