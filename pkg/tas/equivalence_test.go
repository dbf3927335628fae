package tas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
)

// TestHubAnswersAsTheAgent: on many generated clusters, usages and
// requests, the hub's engine on an exact summary gives the agent's answer
// projected to the summary's leaf level: same fit or no fit, same leaf
// domains, same counts. Seeded, so a failure names a reproducible case.
func TestHubAnswersAsTheAgent(t *testing.T) {
	const clusters, requestsPerCluster = 400, 12
	fits, misses, partials, avoided := 0, 0, 0, 0
	for seed := range uint64(clusters) {
		rng := rand.New(rand.NewPCG(seed, 7))
		agent, levels := randomCluster(rng)
		st, err := agent.Summarize(math.MaxInt)
		if err != nil {
			t.Fatal(err)
		}
		hub, err := NewSnapshotFromSummary(&st)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		avoidRng := rand.New(rand.NewPCG(seed, 13)) // apart, so that the other cases stay as they were
		for i := range requestsPerCluster {
			reqs := randomRequests(rng, levels)
			o := randomOptions(rng)
			// Topology spreading's avoided domains, at the top level (the
			// summary's leaf is at or below it): a block, or a rack where
			// racks are the top.
			if avoidRng.IntN(4) == 0 {
				b := avoidRng.IntN(3)
				values := []string{fmt.Sprintf("b%d", b)}
				if levels[0] == rack {
					values = []string{fmt.Sprintf("b%d-r%d", b, avoidRng.IntN(4))}
				}
				avoid := []Avoid{{Level: levels[0], Values: values, Preferred: avoidRng.IntN(2) == 0}}
				for k := range reqs {
					reqs[k].Avoid = avoid
				}
				avoided++
			}
			name := fmt.Sprintf("seed %d request %d: %s avoiding %+v with %+v", seed, i, describe(reqs), reqs[0].Avoid, o)
			var want, got []*Assignment
			var wantErr, gotErr error
			if len(reqs) == 1 {
				var a, h *Assignment
				a, wantErr = agent.FindAssignment(reqs[0], o)
				h, gotErr = hub.FindAssignment(reqs[0], o)
				want, got = []*Assignment{a}, []*Assignment{h}
				if gotErr == nil {
					// A hub copy is placed on the worker without avoiding
					// (the hub spread it). Room is checked on requests that
					// avoid nothing: with avoiding, the room leaves the avoided
					// domains' capacity out.
					plain := reqs[0]
					plain.Avoid = nil
					if len(reqs[0].Avoid) == 0 {
						checkRoom(t, name, hub, reqs[0], o)
					}
					// The agent, told the hub's answer, places the pods in its
					// domains; as it would on its own, but for balanced,
					// unconstrained and preferred-host placements, which it
					// packs per domain rather than over the whole flavor.
					if wantErr == nil && agent.hostIsLowest {
						as, err := agent.FindAssignmentFollowingHint(plain, h, o)
						switch {
						case err != nil:
							t.Errorf("%s: FindAssignmentFollowingHint: %v", name, err)
						case o.BalancedPlacement || reqs[0].Mode == Unconstrained || reqs[0].Mode == Preferred && reqs[0].Level == host:
							if diff := cmp.Diff(h, projectAgent(agent, as), cmpopts.IgnoreFields(Assignment{}, "Tolerations", "NodeSelector", "NodeAffinity")); diff != "" {
								t.Errorf("%s: FindAssignmentFollowingHint, projected (-hint,+hinted):\n%s", name, diff)
							}
						default:
							if diff := cmp.Diff(a, as); diff != "" {
								t.Errorf("%s: FindAssignmentFollowingHint (-own,+hinted):\n%s", name, diff)
							}
						}
					}
				}
			} else {
				want, wantErr = agent.FindGroupAssignment(reqs, o)
				got, gotErr = hub.FindGroupAssignment(reqs, o)
			}
			if (wantErr == nil) != (gotErr == nil) {
				t.Errorf("%s: agent error %v, hub error %v", name, wantErr, gotErr)
				continue
			}
			if wantErr != nil {
				misses++
				continue
			}
			fits++
			for _, r := range reqs {
				if len(r.Layers) == 1 && r.Count%r.Layers[0].Size != 0 {
					partials++
				}
			}
			for j := range want {
				if diff := cmp.Diff(projectAgent(agent, want[j]), got[j], cmpopts.IgnoreFields(Assignment{}, "Tolerations", "NodeSelector", "NodeAffinity")); diff != "" {
					t.Errorf("%s: pod set %d (-agent,+hub):\n%s", name, j, diff)
				}
			}
		}
	}
	// The generator must exercise both answers.
	if total := fits + misses; fits < total/5 || misses < total/10 {
		t.Errorf("%d of %d requests fit: the generated cases do not cover fit and no-fit", fits, total)
	}
	if partials < fits/40 {
		t.Errorf("only %d of the %d fits have a partial slice", partials, fits)
	}
	if avoided < (fits+misses)/8 {
		t.Errorf("only %d of %d requests avoid a domain", avoided, fits+misses)
	}
	t.Logf("%d requests fit (%d with a partial slice), %d did not; %d avoided a domain", fits, partials, misses, avoided)
}

// projectAgent reports an agent assignment at the leaf level.
func projectAgent(s *Snapshot, a *Assignment) *Assignment {
	if a == nil || !s.hostIsLowest {
		return a
	}
	leafDepth := s.depth - 1
	out := &Assignment{Levels: s.levels[:leafDepth], Domains: []DomainAssignment{}}
	for _, d := range a.Domains {
		values := s.hostLeaves[d.Values[0]].values[:leafDepth]
		if n := len(out.Domains); n > 0 && slices.Equal(out.Domains[n-1].Values, values) {
			out.Domains[n-1].Count += d.Count
			continue
		}
		out.Domains = append(out.Domains, DomainAssignment{Values: values, Count: d.Count})
	}
	return out
}

func randomCluster(rng *rand.Rand) (*Snapshot, []string) {
	levels := [][]string{{block, rack, host}, {block, rack}, {rack, host}, {block, rack, host}}[rng.IntN(4)]
	s := NewSnapshot(levels, nil)
	blocks, racks, hosts := 1+rng.IntN(3), 1+rng.IntN(4), 1+rng.IntN(6)
	i := 0
	for b := range blocks {
		for r := range racks {
			for range 1 + rng.IntN(hosts) {
				name := fmt.Sprintf("n-%03d", i)
				i++
				cpus := []int64{2, 4, 8}[rng.IntN(3)]
				gpus := []int64{0, 4, 8}[rng.IntN(3)]
				labels := map[string]string{block: fmt.Sprintf("b%d", b), rack: fmt.Sprintf("b%d-r%d", b, r), host: name,
					"node-id": fmt.Sprintf("id-%d", rng.Int()), gpuMem: []string{"40", "80", "141"}[rng.IntN(3)]}
				if m := []string{"", "a100", "h100"}[rng.IntN(3)]; m != "" {
					labels[model] = m
				}
				s.SetNode(Node{
					Name:   name,
					Labels: labels,
					Allocatable: corev1.ResourceList{
						corev1.ResourceCPU:  *resource.NewQuantity(cpus, resource.DecimalSI),
						corev1.ResourcePods: *resource.NewQuantity(int64(4+rng.IntN(20)), resource.DecimalSI),
						gpu:                 *resource.NewQuantity(gpus, resource.DecimalSI),
					},
					Ready:         rng.IntN(10) > 0,
					Unschedulable: rng.IntN(20) == 0,
					Taints:        randomTaints[rng.IntN(len(randomTaints))],
				})
				if n := rng.Int64N(cpus + 1); n > 0 && rng.IntN(2) == 0 {
					s.AddUsage(name, corev1.ResourceList{
						corev1.ResourceCPU: *resource.NewQuantity(n, resource.DecimalSI),
						gpu:                *resource.NewQuantity(min(n, gpus), resource.DecimalSI),
					}, 1)
				}
			}
		}
	}
	return s, levels
}

// randomTaints are the taints of generated nodes: mostly none; a soft
// taint that never keeps pods away; GPU nodes; GPU nodes in maintenance.
var randomTaints = [][]corev1.Taint{nil, nil, nil, nil,
	{{Key: "spot", Value: "true", Effect: corev1.TaintEffectPreferNoSchedule}},
	{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}},
	{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}, {Key: "maintenance", Effect: corev1.TaintEffectNoExecute}},
}

// Labels of generated nodes besides the topology's: a GPU model (or none),
// GPU memory, and a node ID, unique per node.
const (
	model  = "gpu.example/model"
	gpuMem = "gpu.example/memory-gb"
)

// randomRequirements are the node affinity requirements of generated
// requests: every operator, on the generated labels and a topology level.
var randomRequirements = []corev1.NodeSelectorRequirement{
	{Key: model, Operator: corev1.NodeSelectorOpIn, Values: []string{"a100", "h100"}},
	{Key: model, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"h100"}},
	{Key: model, Operator: corev1.NodeSelectorOpExists},
	{Key: model, Operator: corev1.NodeSelectorOpDoesNotExist},
	{Key: gpuMem, Operator: corev1.NodeSelectorOpGt, Values: []string{"60"}},
	{Key: gpuMem, Operator: corev1.NodeSelectorOpLt, Values: []string{"100"}},
	{Key: rack, Operator: corev1.NodeSelectorOpIn, Values: []string{"b0-r0", "b0-r1", "b1-r2"}},
	{Key: block, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"b1"}},
	{Key: "absent.example/key", Operator: corev1.NodeSelectorOpDoesNotExist},
}

// randomTolerations are the tolerations of generated requests.
var randomTolerations = [][]corev1.Toleration{nil, nil,
	{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}},
	{{Operator: corev1.TolerationOpExists}},
}

func randomRequest(rng *rand.Rand, levels []string, count int32, mode Mode, level string) Request {
	req := Request{Count: count, PodRequests: cpu(fmt.Sprint(1 + rng.IntN(2))), Mode: mode, Level: level,
		Tolerations: randomTolerations[rng.IntN(len(randomTolerations))]}
	if rng.IntN(3) == 0 {
		req.PodRequests[gpu] = resource.MustParse("1")
	}
	if rng.IntN(3) == 0 {
		req.NodeSelector = map[string]string{model: []string{"a100", "h100", "b200"}[rng.IntN(3)]}
	}
	if rng.IntN(4) == 0 {
		req.NodeAffinity = &corev1.NodeSelector{}
		for range 1 + rng.IntN(2) {
			var term corev1.NodeSelectorTerm
			for range 1 + rng.IntN(2) {
				term.MatchExpressions = append(term.MatchExpressions, randomRequirements[rng.IntN(len(randomRequirements))])
			}
			req.NodeAffinity.NodeSelectorTerms = append(req.NodeAffinity.NodeSelectorTerms, term)
		}
	}
	target := 0
	if mode != Unconstrained {
		target = slices.Index(levels, level)
	}
	if rng.IntN(3) == 0 {
		// One or two slice layers at or below the target level.
		sizes := divisors(count)
		size := sizes[rng.IntN(len(sizes))]
		partial := rng.IntN(2) == 0
		if partial {
			// One layer whose size need not divide: a partial slice.
			size = int32(1 + rng.IntN(int(count)))
		}
		l := target + rng.IntN(len(levels)-target)
		req.Layers = []Layer{{levels[l], size}}
		if !partial && l+1 < len(levels) && rng.IntN(2) == 0 {
			inner := divisors(size)
			req.Layers = append(req.Layers, Layer{levels[l+1+rng.IntN(len(levels)-l-1)], inner[rng.IntN(len(inner))]})
		}
	}
	return req
}

func randomRequests(rng *rand.Rand, levels []string) []Request {
	mode := Mode(rng.IntN(3))
	level := levels[rng.IntN(len(levels))]
	if mode == Unconstrained {
		level = ""
	}
	if rng.IntN(5) == 0 && mode != Unconstrained {
		// A pod set group: a leader and its workers.
		leader := Request{Count: 1, PodRequests: cpu("1"), Mode: mode, Level: level}
		return []Request{leader, randomRequest(rng, levels, int32(1+rng.IntN(16)), mode, level)}
	}
	return []Request{randomRequest(rng, levels, int32(1+rng.IntN(30)), mode, level)}
}

func randomOptions(rng *rand.Rand) Options {
	algs := []configv1beta1.Algorithm{configv1beta1.BestFit, configv1beta1.LeastFreeCapacity}
	return Options{
		Required: algs[rng.IntN(2)], Preferred: algs[rng.IntN(2)], Unconstrained: algs[rng.IntN(2)],
		BalancedPlacement: rng.IntN(3) == 0,
	}
}

func divisors(n int32) []int32 {
	var out []int32
	for d := int32(1); d <= n; d++ {
		if n%d == 0 {
			out = append(out, d)
		}
	}
	return out
}

func describe(reqs []Request) string {
	var parts []string
	for _, r := range reqs {
		parts = append(parts, fmt.Sprintf("{%d x %v %s %s layers %v selector %v affinity %v}", r.Count, r.PodRequests, r.Mode, r.Level, r.Layers, r.NodeSelector, r.NodeAffinity))
	}
	return fmt.Sprint(parts)
}

// checkRoom: FindWithRoom's room is the room left after committing the
// placement.
func checkRoom(t *testing.T, name string, s *Snapshot, req Request, o Options) {
	t.Helper()
	a, enclosing, room, err := s.FindWithRoom(req, o)
	if err != nil {
		t.Fatalf("%s: FindWithRoom: %v", name, err)
	}
	u, err := s.Commit(a, req.PodRequests)
	if err != nil {
		t.Fatalf("%s: Commit: %v", name, err)
	}
	defer s.Release(u)
	after, err := s.Room(enclosing, req)
	if err != nil {
		t.Fatalf("%s: Room: %v", name, err)
	}
	if room != after {
		t.Errorf("%s: FindWithRoom says room %d in %v, %d after committing", name, room, enclosing, after)
	}
}
