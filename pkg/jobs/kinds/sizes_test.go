package kinds_test

// The sizes a user types — replicas, size, parallelism, completions, the
// number of ReplicatedJobs — bound what the hub and the agents build from
// an object at each of its events: a fuzz target per registered kind
// (make fuzz), its seeds the ends of int32 and the bounds (they run in
// go test).

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	lwsapi "sigs.k8s.io/lws/api/leaderworkerset/v1"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/intake"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/jobs/kinds"
	"strata.dev/strata/pkg/jobs/lws"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

// sizeFuzzTargets are the fuzz targets of the registered kinds' sizes, by
// kind name (and in the Makefile's FUZZ_TARGETS).
var sizeFuzzTargets = map[string]string{
	"Job":             "FuzzJobSizes",
	"JobSet":          "FuzzJobSetSizes",
	"MPIJob":          "FuzzMPIJobSizes",
	"LeaderWorkerSet": "FuzzLeaderWorkerSetSizes",
}

// TestSizesEveryKind: every registered kind has its sizes fuzzed.
func TestSizesEveryKind(t *testing.T) {
	for _, r := range kinds.Registered {
		if kind := r.Kind.GroupVersionKind().Kind; sizeFuzzTargets[kind] == "" {
			t.Errorf("%s is registered without a fuzz target of its sizes in sizes_test.go: add one", kind)
		}
	}
}

// sizeSeeds are the seeds of each size: the ends of int32, and each
// bound and one past it.
var sizeSeeds = []int32{math.MaxInt32, -1, 0, 1, 1 << 20, math.MinInt32,
	workload.MaxPodSetPods, workload.MaxPodSetPods + 1, workload.MaxGroups, workload.MaxGroups + 1}

// maxAlloc bounds the memory built from one object: far below what a
// size near int32's end would take, far above what any bounded one does.
const maxAlloc = 32 << 20

// allocated is the memory f allocates, in bytes.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// checkWorkload builds what the hub and an agent build from j at each
// event — its Workload as intake writes it, its worker's copy, its lean
// templates (kinds.HubTransform) — and fails unless that allocates less
// than maxAlloc, the Workload holds 1 to MaxPodSets pod sets of 0 pods
// or more, and its errors name every field of over (the fields over
// their bound), or, over empty, there are none and every pod set counts
// at most MaxPodSetPods pods. It returns the Workload and its errors.
func checkWorkload(t *testing.T, j jobs.Job, over ...string) *strata.Workload {
	t.Helper()
	var wl *strata.Workload
	var errs field.ErrorList
	if n := allocated(func() {
		wl, errs = intake.DesiredWorkload(j, tas.Options{})
		j.ForWorker()
		if _, err := kinds.HubTransform()(j.Object().DeepCopyObject()); err != nil {
			t.Errorf("HubTransform: %v", err)
		}
	}); n > maxAlloc {
		t.Fatalf("%d bytes built from one %s", n, j.Kind().GroupVersionKind().Kind)
	}
	if n := len(wl.Spec.PodSets); n < 1 || n > workload.MaxPodSets {
		t.Fatalf("%d pod sets, want 1 to %d", n, workload.MaxPodSets)
	}
	for _, ps := range wl.Spec.PodSets {
		if ps.Count < 0 || len(errs) == 0 && ps.Count > workload.MaxPodSetPods {
			t.Fatalf("pod set %s of %d pods (errors: %v)", ps.Name, ps.Count, errs)
		}
	}
	wantErrors(t, errs.ToAggregate(), over...)
	return wl
}

// wantErrors fails unless err names every field of over, or, over empty,
// is nil.
func wantErrors(t *testing.T, err error, over ...string) {
	t.Helper()
	if len(over) == 0 {
		if err != nil {
			t.Fatalf("sizes within the bounds: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("no error for %v over the bounds", over)
	}
	for _, f := range over {
		if !strings.Contains(err.Error(), f+": ") {
			t.Fatalf("the error does not name %s: %v", f, err)
		}
	}
}

// overIf is field when over, else nothing.
func overIf(over bool, field string) []string {
	if over {
		return []string{field}
	}
	return nil
}

// adapt is obj as a job of its registered kind.
func adapt(t *testing.T, obj client.Object) jobs.Job {
	t.Helper()
	j, ok := jobs.AdaptAny(kinds.Hub, obj)
	if !ok {
		t.Fatalf("%T is of no registered kind", obj)
	}
	return j
}

// FuzzJobSizes: a Job's parallelism and completions (unset when nil)
// give a pod set of their pods at once, never negative; a negative one
// (which the API server refuses) or, over MaxPodSetPods, a count of pods
// gives an Invalid Workload naming the field.
func FuzzJobSizes(f *testing.F) {
	for _, n := range sizeSeeds {
		f.Add(n, n, false, true)
		f.Add(n, int32(4), false, false)
	}
	f.Fuzz(func(t *testing.T, parallelism, completions int32, nilParallelism, nilCompletions bool) {
		job := samples["Job"].object().(*batchv1.Job)
		job.Spec.Parallelism, job.Spec.Completions = ptr.To(parallelism), ptr.To(completions)
		if nilParallelism {
			job.Spec.Parallelism, parallelism = nil, 1
		}
		path, pods := "spec.parallelism", parallelism
		if nilCompletions {
			job.Spec.Completions = nil
		} else if completions < parallelism {
			path, pods = "spec.completions", completions
		}
		pods = max(pods, 0)
		invalid := overIf(pods > workload.MaxPodSetPods, path)
		if negative := append(overIf(!nilParallelism && parallelism < 0, "spec.parallelism"),
			overIf(!nilCompletions && completions < 0, "spec.completions")...); len(negative) > 0 {
			invalid = negative
		}
		wl := checkWorkload(t, adapt(t, job), invalid...)
		if got := wl.Spec.PodSets[0].Count; got != pods {
			t.Fatalf("count %d, want %d", got, pods)
		}
	})
}

// FuzzJobSetSizes: a JobSet's ReplicatedJobs give a pod set each, the
// first n of replicas × the pods of each Job (the others one Job of one
// pod), or, over MaxPodSets or MaxPodSetPods, an Invalid Workload naming
// the field, which holds MaxPodSets pod sets at the most.
func FuzzJobSetSizes(f *testing.F) {
	for _, n := range sizeSeeds {
		f.Add(uint8(1), n, n, int32(1))
		f.Add(uint8(2), int32(2), n, n)
	}
	f.Add(uint8(workload.MaxPodSets), int32(1), int32(1), int32(1))
	f.Add(uint8(workload.MaxPodSets+1), int32(1<<16), int32(1<<16), int32(1<<16))
	f.Add(uint8(255), int32(math.MaxInt32), int32(2), int32(2))
	f.Fuzz(func(t *testing.T, n uint8, replicas, parallelism, completions int32) {
		js := samples["JobSet"].object().(*jobsetapi.JobSet)
		rj := js.Spec.ReplicatedJobs[0]
		rj.Template.Spec.Parallelism, rj.Template.Spec.Completions = ptr.To[int32](1), ptr.To[int32](1)
		js.Spec.ReplicatedJobs = make([]jobsetapi.ReplicatedJob, max(n, 1))
		for i := range js.Spec.ReplicatedJobs {
			js.Spec.ReplicatedJobs[i] = *rj.DeepCopy()
			js.Spec.ReplicatedJobs[i].Name = fmt.Sprintf("rj-%d", i)
			js.Spec.ReplicatedJobs[i].Replicas = 1
		}
		first := &js.Spec.ReplicatedJobs[0]
		first.Replicas = replicas
		first.Template.Spec.Parallelism, first.Template.Spec.Completions = ptr.To(parallelism), ptr.To(completions)
		pods := int64(max(replicas, 0)) * int64(max(min(parallelism, completions), 0))
		over := overIf(len(js.Spec.ReplicatedJobs) > workload.MaxPodSets, "spec.replicatedJobs")
		over = append(over, overIf(pods > workload.MaxPodSetPods, "spec.replicatedJobs[0].replicas")...)
		wl := checkWorkload(t, adapt(t, js), over...)
		if got := wl.Spec.PodSets[0].Count; pods <= workload.MaxPodSetPods && int64(got) != pods {
			t.Fatalf("count %d, want %d", got, pods)
		}
	})
}

// FuzzMPIJobSizes: an MPIJob's launcher and worker replicas (unset when
// nil) give a pod set each, of their replicas, never negative, or, over
// MaxPodSetPods, an Invalid Workload naming the field.
func FuzzMPIJobSizes(f *testing.F) {
	for _, n := range sizeSeeds {
		f.Add(int32(1), n, false, false)
		f.Add(n, int32(1), false, true)
	}
	f.Fuzz(func(t *testing.T, launcher, workers int32, nilLauncher, nilWorkers bool) {
		j := samples["MPIJob"].object().(*kubeflow.MPIJob)
		specs := j.Spec.MPIReplicaSpecs
		specs[kubeflow.MPIReplicaTypeLauncher].Replicas = ptr.To(launcher)
		specs[kubeflow.MPIReplicaTypeWorker].Replicas = ptr.To(workers)
		if nilLauncher {
			specs[kubeflow.MPIReplicaTypeLauncher].Replicas, launcher = nil, 1
		}
		if nilWorkers {
			specs[kubeflow.MPIReplicaTypeWorker].Replicas, workers = nil, 1
		}
		launcher, workers = max(launcher, 0), max(workers, 0)
		over := overIf(launcher > workload.MaxPodSetPods, "spec.mpiReplicaSpecs[Launcher].replicas")
		over = append(over, overIf(workers > workload.MaxPodSetPods, "spec.mpiReplicaSpecs[Worker].replicas")...)
		wl := checkWorkload(t, adapt(t, j), over...)
		if got := []int32{wl.Spec.PodSets[0].Count, wl.Spec.PodSets[1].Count}; got[0] != launcher || got[1] != workers {
			t.Fatalf("counts %v, want [%d %d]", got, launcher, workers)
		}
	})
}

// FuzzLeaderWorkerSetSizes: a LeaderWorkerSet's replicas (unset when
// nil), size and maxSurge (a number, or a percentage) give the hub at most the groups a Workload holds
// and a worker at most MaxGroups groups' Workloads — group 0's alone,
// Invalid, over it, and the hub's aggregate of the copy says so — never
// a name per group the set merely asks for; a size over MaxPodSetPods is
// Invalid, naming the field.
func FuzzLeaderWorkerSetSizes(f *testing.F) {
	for _, n := range sizeSeeds {
		f.Add(n, int32(3), false, false, int32(25), true)
		f.Add(int32(2), n, false, true, int32(1), false)
	}
	f.Add(int32(0), int32(0), true, false, int32(0), false)
	f.Add(int32(math.MaxInt32), int32(math.MaxInt32), false, false, int32(100000000), true)
	f.Add(int32(workload.MaxPodSets/2), int32(1), false, true, int32(math.MaxInt32), false)
	f.Fuzz(func(t *testing.T, replicas, size int32, nilReplicas, noLeader bool, surge int32, percent bool) {
		l := samples["LeaderWorkerSet"].object().(*lwsapi.LeaderWorkerSet)
		l.Spec.Replicas, l.Spec.LeaderWorkerTemplate.Size = ptr.To(replicas), ptr.To(size)
		if nilReplicas {
			l.Spec.Replicas, replicas = nil, 1
		}
		if noLeader {
			l.Spec.LeaderWorkerTemplate.LeaderTemplate = nil
		}
		maxSurge := intstr.FromInt32(surge)
		if percent {
			maxSurge = intstr.FromString(fmt.Sprintf("%d%%", surge))
		}
		l.Spec.RolloutStrategy.RollingUpdateConfiguration = &lwsapi.RollingUpdateConfiguration{MaxSurge: maxSurge}
		replicas, size = max(replicas, 0), max(size, 1)
		if s := lws.MaxSurge(l); s < 0 || s > replicas {
			t.Fatalf("maxSurge %s of %d replicas: %d", maxSurge.String(), replicas, s)
		}
		perGroup := int32(2)
		if noLeader || size == 1 {
			perGroup = 1
		}
		sizeOver := overIf(size > workload.MaxPodSetPods, "spec.leaderWorkerTemplate.size")
		hubOver := append(overIf(replicas == 0 || replicas > workload.MaxPodSets/perGroup, "spec.replicas"), sizeOver...)
		checkWorkload(t, adapt(t, l), hubOver...)

		// What a worker keeps, and the hub reads back for the copy.
		groupsOver := append(overIf(replicas > workload.MaxGroups, "spec.replicas"), sizeOver...)
		groups := replicas
		if replicas > workload.MaxGroups {
			groups = 1 // group 0's, Invalid
		}
		checkGroups(t, l, int(groups), groupsOver...)
	})
}

// checkGroups checks the Workloads a worker keeps for a LeaderWorkerSet
// and the jobs it admits, groups of each, and the hub's aggregate of
// them: built in less than maxAlloc, the first and last group's Workload
// as checkWorkload wants it, and the aggregate Invalid, naming the fields
// of over, or else waiting for the groups without a Workload.
func checkGroups(t *testing.T, l *lwsapi.LeaderWorkerSet, groups int, over ...string) {
	t.Helper()
	g := lws.SetKind.(jobs.GroupedWorkloads)
	var names []string
	var groupJobs []jobs.Job
	if n := allocated(func() {
		names, groupJobs = g.WorkerWorkloads(l), g.WorkerJobs(l)
	}); n > maxAlloc {
		t.Fatalf("%d bytes for the names and jobs of %d groups", n, groups)
	}
	if len(names) != groups || len(groupJobs) != groups {
		t.Fatalf("%d Workload names and %d jobs, want %d groups", len(names), len(groupJobs), groups)
	}
	if groups == 0 {
		return
	}
	wls := make([]*strata.Workload, groups)
	for _, i := range []int{0, groups - 1} {
		if want := groupJobs[i].Kind().WorkloadName(l.Name); names[i] != want {
			t.Fatalf("group %d's Workload %s, its job's %s", i, names[i], want)
		}
		wls[i] = checkWorkload(t, groupJobs[i], over...)
	}
	agg := g.Aggregate(l, wls)
	invalid := meta.FindStatusCondition(agg.Status.Conditions, strata.WorkloadInvalid)
	switch {
	case len(over) > 0 && invalid == nil:
		t.Fatalf("the aggregate of a copy over the bounds is not Invalid: %v", agg.Status.Conditions)
	case len(over) > 0:
		wantErrors(t, fmt.Errorf("%s", invalid.Message), over...)
	case invalid != nil:
		t.Fatalf("the aggregate of a copy within the bounds is Invalid: %s", invalid.Message)
	}
}

// TestSizeBounds: each kind takes its sizes at their bound and refuses
// them one past it, naming the field, and never builds more pod sets
// than a Workload holds.
func TestSizeBounds(t *testing.T) {
	job := func(parallelism, completions int32) client.Object {
		j := samples["Job"].object().(*batchv1.Job)
		j.Spec.Parallelism, j.Spec.Completions = ptr.To(parallelism), ptr.To(completions)
		return j
	}
	jobSet := func(n int, replicas int32, perJob int32) client.Object {
		js := samples["JobSet"].object().(*jobsetapi.JobSet)
		rj := js.Spec.ReplicatedJobs[0]
		js.Spec.ReplicatedJobs = nil
		for i := range n {
			r := *rj.DeepCopy()
			r.Name, r.Replicas = fmt.Sprintf("rj-%d", i), 1
			js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, r)
		}
		first := &js.Spec.ReplicatedJobs[0]
		first.Replicas = replicas
		first.Template.Spec.Parallelism, first.Template.Spec.Completions = ptr.To(perJob), ptr.To(perJob)
		return js
	}
	mpiJob := func(workers int32) client.Object {
		j := samples["MPIJob"].object().(*kubeflow.MPIJob)
		j.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Replicas = ptr.To(workers)
		return j
	}
	leaderWorkerSet := func(replicas, size int32) *lwsapi.LeaderWorkerSet {
		l := samples["LeaderWorkerSet"].object().(*lwsapi.LeaderWorkerSet)
		l.Spec.Replicas, l.Spec.LeaderWorkerTemplate.Size = ptr.To(replicas), ptr.To(size)
		return l
	}
	group := func(replicas, size int32) jobs.Job {
		j, _ := lws.GroupKind(0).Adapt(leaderWorkerSet(replicas, size))
		return j
	}
	podsOver := func(path string, value any, how string, n int) string {
		return fmt.Sprintf("%s: Invalid value: %v: %s: %d pods, more than the 100000 one pod set may have under Strata; lower it, or split the workload", path, value, how, n)
	}
	cases := map[string]struct {
		job     jobs.Job
		podSets int
		want    []string
	}{
		"Job: parallelism at the bound": {job: adapt(t, job(100000, 100000)), podSets: 1},
		"Job: parallelism one over": {job: adapt(t, job(100001, math.MaxInt32)), podSets: 1,
			want: []string{podsOver("spec.parallelism", 100001, "parallelism, capped by completions", 100001)}},
		"Job: completions one over, under a larger parallelism": {job: adapt(t, job(math.MaxInt32, 100001)), podSets: 1,
			want: []string{podsOver("spec.completions", 100001, "parallelism, capped by completions", 100001)}},
		"JobSet: as many ReplicatedJobs as a Workload holds pod sets": {job: adapt(t, jobSet(32, 1, 1)), podSets: 32},
		"JobSet: one ReplicatedJob more, and only those a Workload holds": {job: adapt(t, jobSet(33, 1, 1)), podSets: 32,
			want: []string{"spec.replicatedJobs: Invalid value: 33: 33 ReplicatedJobs, more than the 32 pod sets a Workload holds (one per ReplicatedJob); merge those of one template, or split the JobSet"}},
		"JobSet: replicas × pods per Job at the bound": {job: adapt(t, jobSet(1, 50000, 2)), podSets: 1},
		"JobSet: replicas × pods per Job one Job over": {job: adapt(t, jobSet(1, 50001, 2)), podSets: 1,
			want: []string{podsOver("spec.replicatedJobs[0].replicas", 50001, "50001 Jobs of 2 pods each (parallelism, capped by completions)", 100002)}},
		"JobSet: a product that wraps int32 to 0 is not 0 pods": {job: adapt(t, jobSet(1, 1<<16, 1<<16)), podSets: 1,
			want: []string{podsOver("spec.replicatedJobs[0].replicas", 1<<16, "65536 Jobs of 65536 pods each (parallelism, capped by completions)", 1<<32)}},
		"MPIJob: workers at the bound": {job: adapt(t, mpiJob(100000)), podSets: 2},
		"MPIJob: workers one over": {job: adapt(t, mpiJob(100001)), podSets: 2,
			want: []string{podsOver("spec.mpiReplicaSpecs[Worker].replicas", 100001, "replicas", 100001)}},
		"LeaderWorkerSet group: groups at the bound": {job: group(1000, 3), podSets: 2},
		"LeaderWorkerSet group: one group over": {job: group(1001, 3), podSets: 2,
			want: []string{"spec.replicas: Invalid value: 1001: 1001 groups, more than the 1000 a LeaderWorkerSet may have under Strata (its worker cluster keeps a Workload per group); lower it, or split the set"}},
		"LeaderWorkerSet group: size at the bound": {job: group(2, 100000), podSets: 2},
		"LeaderWorkerSet group: size one over": {job: group(2, 100001), podSets: 2,
			want: []string{podsOver("spec.leaderWorkerTemplate.size", 100001, "size, a group's pods", 100001)}},
		"LeaderWorkerSet through the hub: replicas at int32's end are the groups a Workload holds": {job: adapt(t, leaderWorkerSet(math.MaxInt32, 3)), podSets: 32,
			want: []string{"spec.replicas: Invalid value: 2147483647: through the hub a LeaderWorkerSet has at most 16 groups (a Workload holds 32 pod sets, 2 per group): submit it on a worker cluster, or split it"}},
		"LeaderWorkerSet through the hub: size one over": {job: adapt(t, leaderWorkerSet(2, 100001)), podSets: 4,
			want: []string{podsOver("spec.leaderWorkerTemplate.size", 100001, "size, a group's pods", 100001)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wl, errs := jobs.WorkloadFor(tc.job)
			var got []string
			for _, err := range errs {
				got = append(got, err.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want,+got):\n%s", diff)
			}
			if n := len(wl.Spec.PodSets); n != tc.podSets {
				t.Errorf("%d pod sets, want %d", n, tc.podSets)
			}
		})
	}
}
