package tas

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
)

func TestEncodeKEPExample(t *testing.T) {
	a := &Assignment{Levels: []string{block, rack}, Domains: []DomainAssignment{
		{Values: []string{"block-1", "rack-1"}, Count: 4},
		{Values: []string{"block-1", "rack-2"}, Count: 2},
	}}
	want := &strata.TopologyAssignment{
		Levels: []string{block, rack},
		Slices: []strata.TopologyAssignmentSlice{{
			DomainCount: 2,
			ValuesPerLevel: []strata.TopologyAssignmentSliceLevelValues{
				{Universal: ptr.To("block-1")},
				{Individual: &strata.TopologyAssignmentSliceLevelIndividualValues{Prefix: ptr.To("rack-"), Roots: []string{"1", "2"}}},
			},
			PodCounts: strata.TopologyAssignmentSlicePodCounts{Individual: []int32{4, 2}},
		}},
	}
	if diff := cmp.Diff(want, Encode(a)); diff != "" {
		t.Errorf("Encode() (-want,+got):\n%s", diff)
	}
}

func hostAssignment(names []string, count func(i int) int32) *Assignment {
	a := &Assignment{Levels: []string{host}}
	for i, n := range names {
		a.Domains = append(a.Domains, DomainAssignment{Values: []string{n}, Count: count(i)})
	}
	return a
}

func TestEncodeRoundTrip(t *testing.T) {
	one := func(int) int32 { return 1 }
	cases := map[string]*Assignment{
		"empty":      {Levels: []string{host}},
		"one domain": hostAssignment([]string{"node-1"}, one),
		"KEP node pools": hostAssignment([]string{
			"pool-1-node-1", "pool-1-node-2", "pool-1-node-3", "pool-1-node-4", "pool-1-node-5",
			"pool-2-node-1", "pool-2-node-2", "pool-2-node-3", "pool-2-node-4", "pool-2-node-5", "pool-2-node-6", "pool-2-node-7",
		}, one),
		"prefix and suffix that would overlap": hostAssignment([]string{"a", "ab", "aab", "b"}, func(i int) int32 { return int32(i + 1) }),
		"same value twice":                     hostAssignment([]string{"x", "x"}, one),
		"three levels, shared block": {Levels: []string{block, rack, host}, Domains: []DomainAssignment{
			{Values: []string{"b1", "r1", "h1.example.com"}, Count: 3},
			{Values: []string{"b1", "r2", "h2.example.com"}, Count: 3},
			{Values: []string{"b1", "r2", "h3.example.com"}, Count: 3},
		}},
	}
	for name, a := range cases {
		t.Run(name, func(t *testing.T) {
			ta := Encode(a)
			if len(a.Domains) > 0 {
				if err := checkAPIRules(ta); err != nil {
					t.Fatalf("Encode() breaks an API rule: %v\n%+v", err, ta)
				}
			}
			got, err := Decode(ta)
			if len(a.Domains) == 0 {
				if got != nil && len(got.Domains) != 0 {
					t.Fatalf("Decode(Encode(empty)) = %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode(Encode()) error: %v", err)
			}
			if diff := cmp.Diff(a, got); diff != "" {
				t.Errorf("Decode(Encode()) (-want,+got):\n%s", diff)
			}
		})
	}
}

// checkAPIRules checks the schema limits the CRD enforces on a non-empty
// assignment.
func checkAPIRules(ta *strata.TopologyAssignment) error {
	if len(ta.Slices) == 0 || len(ta.Slices) > maxSlices {
		return fmt.Errorf("%d slices", len(ta.Slices))
	}
	for i, s := range ta.Slices {
		for _, lv := range s.ValuesPerLevel {
			if iv := lv.Individual; iv != nil {
				if iv.Prefix != nil && (*iv.Prefix == "" || len(*iv.Prefix) > 63) ||
					iv.Suffix != nil && (*iv.Suffix == "" || len(*iv.Suffix) > 63) {
					return fmt.Errorf("slice %d: bad prefix/suffix", i)
				}
				if len(iv.Roots) > maxDomainsPerSlice {
					return fmt.Errorf("slice %d: %d roots", i, len(iv.Roots))
				}
			}
		}
	}
	return nil
}

// realisticNames returns n node names in the styles of the big providers,
// in node pools of 1,000 consecutive nodes.
func realisticNames(n int) []string {
	r := rand.New(rand.NewPCG(1, 2))
	const alnum = "abcdefghijklmnopqrstuvwxyz0123456789"
	randStr := func(k int) string {
		b := make([]byte, k)
		for i := range b {
			b[i] = alnum[r.IntN(len(alnum))]
		}
		return string(b)
	}
	names := make([]string, 0, n)
	for i := 0; len(names) < n; i++ {
		switch i / 1000 % 4 {
		case 0: // GKE: gke-<cluster>-<pool>-<hash>-<4 chars>, 1,000 nodes per group
			pool := fmt.Sprintf("gke-training-cluster-a3-highgpu-pool-%d-%s", i/4000, "9f3c2a1b")
			names = append(names, pool+"-"+randStr(4))
		case 1: // EKS: ip-10-x-y-z.<region>.compute.internal
			names = append(names, fmt.Sprintf("ip-10-%d-%d-%d.us-west-2.compute.internal", i/65536%256, i/256%256, i%256))
		case 2: // AKS: aks-<pool>-<id>-vmss<6 base36>
			names = append(names, fmt.Sprintf("aks-gpupool%d-41822919-vmss%06s", i/4000, strings.ToLower(fmt.Sprintf("%x", i))))
		default: // on-premise: gpu-node-<n>
			names = append(names, fmt.Sprintf("dc1-gpu-node-%05d", i))
		}
	}
	return names
}

func TestEncodeSixtyThousandNodesFitsInEtcd(t *testing.T) {
	names := realisticNames(60000)
	a := hostAssignment(names, func(i int) int32 { return int32(1 + i%8) })
	ta := Encode(a)
	data, err := json.Marshal(ta)
	if err != nil {
		t.Fatal(err)
	}
	const limit = 1536 * 1024
	t.Logf("60,000 domains: %d bytes of JSON in %d slices", len(data), len(ta.Slices))
	if len(data) >= limit {
		t.Errorf("encoded assignment is %d bytes, want < %d", len(data), limit)
	}
	if err := checkAPIRules(ta); err != nil {
		t.Fatal(err)
	}
	got, err := Decode(ta)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, got); diff != "" {
		t.Errorf("round trip (-want,+got):\n%s", diff)
	}
}

func TestDecodeErrors(t *testing.T) {
	valid := func() *strata.TopologyAssignment {
		return Encode(&Assignment{Levels: []string{block, rack}, Domains: []DomainAssignment{
			{Values: []string{"block-1", "rack-1"}, Count: 4},
			{Values: []string{"block-1", "rack-2"}, Count: 2},
		}})
	}
	cases := map[string]struct {
		mutate  func(ta *strata.TopologyAssignment)
		wantErr string
	}{
		"no levels":               {func(ta *strata.TopologyAssignment) { ta.Levels = nil }, "levels: at least one level is required"},
		"zero domains":            {func(ta *strata.TopologyAssignment) { ta.Slices[0].DomainCount = 0 }, "slices[0].domainCount: 0 must be at least 1"},
		"roots shorter":           {func(ta *strata.TopologyAssignment) { ta.Slices[0].DomainCount = 3 }, "slices[0].valuesPerLevel[1].individual.roots: has 2 entries, want domainCount (3)"},
		"values for fewer levels": {func(ta *strata.TopologyAssignment) { ta.Levels = append(ta.Levels, host) }, "slices[0].valuesPerLevel: has 2 entries, want one per level (3)"},
		"both universal and individual": {func(ta *strata.TopologyAssignment) {
			ta.Slices[0].ValuesPerLevel[1].Universal = ptr.To("x")
		}, "slices[0].valuesPerLevel[1]: exactly one of universal and individual must be set"},
		"no pod counts": {func(ta *strata.TopologyAssignment) {
			ta.Slices[0].PodCounts = strata.TopologyAssignmentSlicePodCounts{}
		}, "slices[0].podCounts: exactly one of universal and individual must be set"},
		"a zero pod count": {func(ta *strata.TopologyAssignment) {
			ta.Slices[0].PodCounts.Individual[1] = 0
		}, "slices[0].podCounts: count 0 must be at least 1"},
		"too many domains": {func(ta *strata.TopologyAssignment) {
			ta.Slices[0].DomainCount = maxDecodedDomains + 1
		}, "slices: more than 1048576 domains"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ta := valid()
			tc.mutate(ta)
			_, err := Decode(ta)
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("Decode() error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// FuzzDecode feeds arbitrary JSON to Decode: it must never panic, and what
// it accepts must survive an Encode/Decode round trip.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"levels":["r"],"slices":[{"domainCount":2,"valuesPerLevel":[{"individual":{"prefix":"rack-","roots":["1","2"]}}],"podCounts":{"individual":[4,2]}}]}`))
	f.Add([]byte(`{"levels":["h"],"slices":[{"domainCount":3,"valuesPerLevel":[{"universal":"x"}],"podCounts":{"universal":1}}]}`))
	f.Add([]byte(`{"levels":["a","b"],"slices":[{"domainCount":1,"valuesPerLevel":[{"universal":"x"},{"individual":{"suffix":"-s","roots":[""]}}],"podCounts":{"individual":[1]}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var ta strata.TopologyAssignment
		if json.Unmarshal(data, &ta) != nil {
			return
		}
		a, err := Decode(&ta)
		if err != nil {
			return
		}
		for _, d := range a.Domains {
			if len(d.Values) != len(a.Levels) {
				t.Fatalf("domain %v has %d values for %d levels", d.Values, len(d.Values), len(a.Levels))
			}
		}
		again, err := Decode(Encode(a))
		if len(a.Domains) == 0 {
			return
		}
		if err != nil {
			t.Fatalf("Decode(Encode(Decode(x))) error: %v", err)
		}
		if diff := cmp.Diff(a, again); diff != "" {
			t.Fatalf("round trip (-want,+got):\n%s", diff)
		}
	})
}
