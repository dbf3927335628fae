package tas

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestFindReplacementKeepsSlicesAndHostnames: a slice at a preferred
// request's own level pins the replacement to its domain; a split puts
// the failed node's partial slice last; replacements are named by the
// hostname label, as assignments are, not by the Node's name.
func TestFindReplacementKeepsSlicesAndHostnames(t *testing.T) {
	type result struct {
		Domains []DomainAssignment
		Err     bool
	}
	cases := map[string]struct {
		snap   func() *Snapshot
		req    Request
		failed string
		fail   func(*Snapshot)
		want   result
	}{
		"preferred rack with rack slices: the slice's rack or nothing": {
			snap: func() *Snapshot {
				return snapshotOf([]string{block, rack, host},
					node{"h1", "b1", "r1", "2"}, node{"h2", "b1", "r1", "2"},
					node{"h5", "b1", "r2", "4"}, node{"h6", "b1", "r3", "2"})
			},
			req:    Request{Count: 8, PodRequests: cpu("1"), Mode: Preferred, Level: rack, Layers: []Layer{{rack, 4}}},
			failed: "h2",
			fail:   func(s *Snapshot) { s.RemoveNode("h2") },
			want:   result{Err: true},
		},
		"a split keeps the failed node's partial host slice last": {
			snap: func() *Snapshot {
				return snapshotOf([]string{block, rack, host}, node{"a", "b1", "r1", "2"}, node{"b", "b1", "r1", "4"}, node{"c", "b1", "r1", "5"})
			},
			req:    Request{Count: 5, PodRequests: cpu("1"), Mode: Required, Level: rack, Layers: []Layer{{host, 2}}},
			failed: "c",
			fail: func(s *Snapshot) {
				n := node{"c", "b1", "r1", "5"}.engineNode()
				n.Ready = false
				s.SetNode(n)
			},
			want: result{Domains: []DomainAssignment{{Values: []string{"b"}, Count: 4}, {Values: []string{"a"}, Count: 1}}},
		},
		"named by the hostname label": {
			snap: func() *Snapshot {
				s := NewSnapshot([]string{rack, host}, nil)
				for _, n := range []string{"n1", "n2", "n3"} {
					s.SetNode(Node{Name: n + ".example.internal", Labels: map[string]string{rack: "r1", host: n},
						Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourcePods: resource.MustParse("110")}, Ready: true})
				}
				return s
			},
			req:    Request{Count: 4, PodRequests: cpu("1"), Mode: Required, Level: rack},
			failed: "n1",
			fail:   func(*Snapshot) {},
			want:   result{Domains: []DomainAssignment{{Values: []string{"n3"}, Count: 2}, {Values: []string{"n2"}, Count: 2}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := tc.snap()
			cur, err := s.FindAssignment(tc.req, bestFit)
			if err != nil {
				t.Fatalf("FindAssignment: %v", err)
			}
			if _, err := s.Commit(cur, tc.req.PodRequests); err != nil {
				t.Fatalf("Commit: %v", err)
			}
			tc.fail(s)
			r, err := s.FindReplacement(tc.req, cur, tc.failed)
			var got result
			if err != nil {
				got.Err = true
			} else {
				got.Domains = r.Domains
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("replacement of %s in %v (-want,+got):\n%s", tc.failed, cur.Domains, diff)
			}
		})
	}
}

// TestPartialSliceLastAcrossTopDomains: with LeastFreeCapacity an
// unconstrained request walks the children of all chosen blocks together;
// the partial slice goes last by what each block's leaves hold, not by the
// count the block pass gave it.
func TestPartialSliceLastAcrossTopDomains(t *testing.T) {
	s := snapshotOf([]string{block, rack, host}, node{"x1", "b1", "r1", "2"}, node{"x2", "b1", "r1", "3"}, node{"y1", "b2", "r1", "6"})
	req := Request{Count: 8, PodRequests: cpu("1"), Mode: Unconstrained, Layers: []Layer{{host, 3}}}
	a, err := s.FindAssignment(req, DefaultOptions())
	if err != nil {
		t.Fatalf("FindAssignment: %v", err)
	}
	want := []DomainAssignment{{Values: []string{"x2"}, Count: 3}, {Values: []string{"y1"}, Count: 5}}
	if diff := cmp.Diff(want, a.Domains); diff != "" {
		t.Errorf("assignment (-want,+got):\n%s", diff)
	}
}

// TestHintKeepsCoarserSlices: a hint at the rack level that splits a
// block slice across blocks is refused (the caller then places the pods
// itself); one that keeps each block's pods whole slices is followed.
func TestHintKeepsCoarserSlices(t *testing.T) {
	s := snapshotOf([]string{block, rack, host}, node{"a", "b1", "r1", "8"}, node{"b", "b2", "r1", "8"})
	req := Request{Count: 8, PodRequests: cpu("1"), Mode: Unconstrained, Layers: []Layer{{block, 4}}}
	hint := func(x, y int32) *Assignment {
		return &Assignment{Levels: []string{block, rack}, Domains: []DomainAssignment{{Values: []string{"b1", "r1"}, Count: x}, {Values: []string{"b2", "r1"}, Count: y}}}
	}
	if a, err := s.FindAssignmentFollowingHint(req, hint(2, 6), DefaultOptions()); err == nil {
		t.Errorf("a hint splitting a block slice was followed: %v", a.Domains)
	} else if fe := new(FitError); errors.As(err, &fe) {
		t.Errorf("a hint splitting a block slice: a FitError (%v), want a plain error", err)
	}
	a, err := s.FindAssignmentFollowingHint(req, hint(4, 4), DefaultOptions())
	if err != nil {
		t.Fatalf("a hint in whole block slices: %v", err)
	}
	want := []DomainAssignment{{Values: []string{"a"}, Count: 4}, {Values: []string{"b"}, Count: 4}}
	if diff := cmp.Diff(want, a.Domains); diff != "" {
		t.Errorf("assignment (-want,+got):\n%s", diff)
	}
}
