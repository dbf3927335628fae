package kubectlstrata

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs"
	"strata.dev/strata/pkg/jobs/batchjob"
	"strata.dev/strata/pkg/jobs/jobset"
	"strata.dev/strata/pkg/testutil"
)

func job(labels map[string]string) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train", UID: "job-uid", Labels: labels}}
}

// rackAssignment puts 4 pods on block-1/rack-1 and 2 on block-1/rack-2,
// in the compact format.
func rackAssignment() *strata.TopologyAssignment {
	return &strata.TopologyAssignment{
		Levels: []string{blockLevel, rackLevel},
		Slices: []strata.TopologyAssignmentSlice{{
			DomainCount: 2,
			ValuesPerLevel: []strata.TopologyAssignmentSliceLevelValues{
				{Universal: ptr.To("block-1")},
				{Individual: &strata.TopologyAssignmentSliceLevelIndividualValues{Prefix: ptr.To("rack-"), Roots: []string{"1", "2"}}},
			},
			PodCounts: strata.TopologyAssignmentSlicePodCounts{Individual: []int32{4, 2}},
		}},
	}
}

func explainWorkload() *strata.Workload {
	wl := testutil.MakeWorkload("job-train", "ml").Queue("team-a").Obj()
	wl.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "job-uid", Controller: ptr.To(true)}}
	return wl
}

func TestNewExplainView(t *testing.T) {
	attemptTime := *minutes(10)
	cases := map[string]struct {
		workload func(*strata.Workload)
		hub      bool
		want     ExplainView
	}{
		"a hub Workload placed, refused once, admitted": {
			hub: true,
			workload: func(wl *strata.Workload) {
				wl.Status.Conditions = []metav1.Condition{cond(strata.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", "admitted on w2")}
				wl.Status.Placement = &strata.Placement{Cluster: "w2", Flavor: "gpu", DispatchGeneration: 2, Attempts: []strata.PlacementAttempt{
					{Cluster: "w1", Flavor: "gpu", DispatchGeneration: 1, Result: strata.PlacementRejected, Time: attemptTime, Message: "LocalQueueNotFound"},
					{Cluster: "w2", Flavor: "gpu", DispatchGeneration: 2, Result: strata.PlacementAdmitted, Time: attemptTime},
				}}
				wl.Status.Admission = &strata.Admission{ClusterQueue: "cq", PodSetAssignments: []strata.PodSetAssignment{
					{Name: "main", Flavor: "gpu", Count: 6, TopologyAssignment: rackAssignment()},
				}}
			},
			want: ExplainView{
				Role: "hub", Job: ObjectRef{Namespace: "ml", Name: "train"}, Workload: "job-train", Queue: "team-a",
				Admitted: &ConditionView{Status: metav1.ConditionTrue, Reason: "Admitted", Message: "admitted on w2"},
				Placement: &PlacementView{Cluster: "w2", Flavor: "gpu", DispatchGeneration: 2, Attempts: []AttemptView{
					{Cluster: "w1", Flavor: "gpu", DispatchGeneration: 1, Result: "Rejected", Time: attemptTime, Message: "LocalQueueNotFound"},
					{Cluster: "w2", Flavor: "gpu", DispatchGeneration: 2, Result: "Admitted", Time: attemptTime},
				}},
				Admission: &AdmissionView{ClusterQueue: "cq", PodSets: []PodSetAdmissionView{{
					Name: "main", Flavor: "gpu", Count: 6, Levels: []string{blockLevel, rackLevel},
					Domains: []AssignedDomainView{{Values: []string{"block-1", "rack-1"}, Pods: 4}, {Values: []string{"block-1", "rack-2"}, Pods: 2}},
				}}},
			},
		},
		"a hub's copy waiting on a worker": {
			workload: func(wl *strata.Workload) {
				wl.Labels = map[string]string{strata.OriginLabel: "strata-hub", strata.HubWorkloadUIDLabel: "hub-uid", strata.DispatchGenerationLabel: "2"}
				wl.Annotations = map[string]string{strata.FlavorAnnotation: "gpu"}
				wl.Status.Conditions = []metav1.Condition{
					cond(strata.WorkloadAdmitted, metav1.ConditionFalse, "Pending", "rack required: the best rack holds 6 of 8 pods"),
					cond(strata.WorkloadInvalid, metav1.ConditionFalse, "Valid", ""),
				}
			},
			want: ExplainView{
				Role: "worker", Job: ObjectRef{Namespace: "ml", Name: "train"}, Workload: "job-train", Queue: "team-a",
				Admitted: &ConditionView{Status: metav1.ConditionFalse, Reason: "Pending", Message: "rack required: the best rack holds 6 of 8 pods"},
				Invalid:  &ConditionView{Status: metav1.ConditionFalse, Reason: "Valid"},
				Dispatch: &DispatchView{Origin: "strata-hub", HubWorkloadUID: "hub-uid", Generation: "2", Flavor: "gpu"},
			},
		},
		"a hub Workload deleted while its worker does not answer": {
			hub: true,
			workload: func(wl *strata.Workload) {
				wl.DeletionTimestamp = minutes(1)
				wl.Finalizers = []string{strata.CopyGoneFinalizer}
				wl.Status.Conditions = []metav1.Condition{cond(strata.WorkloadWorkerUnreachable, metav1.ConditionTrue, "WorkerUnreachable", "worker w1 does not answer")}
				wl.Status.Placement = &strata.Placement{Cluster: "w1", Flavor: "gpu", DispatchGeneration: 1}
			},
			want: ExplainView{
				Role: "hub", Job: ObjectRef{Namespace: "ml", Name: "train"}, Workload: "job-train", Queue: "team-a",
				Deleting:    "it goes once its copy on w1 is gone or known stopped there (worker w1 does not answer)",
				Unreachable: &ConditionView{Status: metav1.ConditionTrue, Reason: "WorkerUnreachable", Message: "worker w1 does not answer"},
				Placement:   &PlacementView{Cluster: "w1", Flavor: "gpu", DispatchGeneration: 1},
			},
		},
		"a copy's Workload on a worker, deleted, waiting for its pods": {
			workload: func(wl *strata.Workload) {
				wl.DeletionTimestamp = minutes(1)
				wl.Finalizers = []string{strata.PodsGoneFinalizer}
				wl.Annotations = map[string]string{strata.GoingPodsAnnotation: "train-0 (Terminating since 2026-12-07T11:00:00Z, node n1)"}
			},
			want: ExplainView{
				Role: "worker", Job: ObjectRef{Namespace: "ml", Name: "train"}, Workload: "job-train", Queue: "team-a",
				Deleting: "it goes once its pods are gone (strata-agent removes its strata.dev/pods-gone finalizer then); waiting for train-0 (Terminating since 2026-12-07T11:00:00Z, node n1)",
			},
		},
		"an invalid Workload and an assignment that does not decode": {
			workload: func(wl *strata.Workload) {
				wl.Status.Conditions = []metav1.Condition{cond(strata.WorkloadInvalid, metav1.ConditionTrue, "LocalQueueNotFound", "LocalQueue team-a not found")}
				wl.Status.Admission = &strata.Admission{ClusterQueue: "cq", PodSetAssignments: []strata.PodSetAssignment{
					{Name: "main", Flavor: "gpu", Count: 6, TopologyAssignment: &strata.TopologyAssignment{}},
				}}
				wl.Status.UnhealthyNodes = []strata.UnhealthyNode{{Name: "node-3"}}
			},
			want: ExplainView{
				Role: "worker", Job: ObjectRef{Namespace: "ml", Name: "train"}, Workload: "job-train", Queue: "team-a",
				Invalid: &ConditionView{Status: metav1.ConditionTrue, Reason: "LocalQueueNotFound", Message: "LocalQueue team-a not found"},
				Admission: &AdmissionView{ClusterQueue: "cq", PodSets: []PodSetAdmissionView{{
					Name: "main", Flavor: "gpu", Count: 6, Problem: "the topology assignment does not decode: levels: at least one level is required",
				}}},
				UnhealthyNodes: []string{"node-3"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wl := explainWorkload()
			tc.workload(wl)
			got := newExplainView(batchjob.Adapt(job(map[string]string{strata.QueueNameLabel: "team-a"})), wl, tc.hub)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("newExplainView (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestExplainErrors(t *testing.T) {
	stale := explainWorkload()
	stale.OwnerReferences[0].UID = types.UID("earlier-uid")
	cases := map[string]struct {
		err  error
		want string
	}{
		"a Job without the queue label": {
			err:  checkManaged(batchjob.Adapt(job(map[string]string{"app": "x"}))),
			want: "job ml/train is not managed by Strata: it has no strata.dev/queue-name label",
		},
		"a Job with the label": {
			err: checkManaged(batchjob.Adapt(job(map[string]string{strata.QueueNameLabel: "team-a"}))),
		},
		"no Workload": {
			err:  noWorkloadYet(batchjob.Adapt(job(nil)), nil),
			want: "job ml/train has no Workload yet (job-train): strata-agent on a worker, or strata-hub on a hub, creates it; is it running?",
		},
		"the Workload of an earlier Job": {
			err:  noWorkloadYet(batchjob.Adapt(job(nil)), stale),
			want: "job ml/train has no Workload yet: job-train belongs to an earlier Job of that name and is being replaced",
		},
		"the Workload of an earlier Job, waiting for its copy": {
			err: noWorkloadYet(batchjob.Adapt(job(nil)), func() *strata.Workload {
				wl := stale.DeepCopy()
				wl.DeletionTimestamp = minutes(1)
				wl.Finalizers = []string{strata.CopyGoneFinalizer}
				wl.Status.Placement = &strata.Placement{Cluster: "w1", DispatchGeneration: 1}
				return wl
			}()),
			want: "job ml/train has no Workload yet: job-train belongs to an earlier Job of that name, which is being deleted; it goes once its copy on w1 is gone or known stopped there; then this Job gets its own",
		},
		"on a worker, the Workload of an earlier copy of that name, waiting for its pods": {
			err: noWorkloadYet(batchjob.Adapt(job(nil)), func() *strata.Workload {
				wl := stale.DeepCopy()
				wl.DeletionTimestamp = minutes(1)
				wl.Finalizers = []string{strata.PodsGoneFinalizer}
				return wl
			}()),
			want: "job ml/train has no Workload yet: job-train belongs to an earlier Job of that name, which is being deleted; it goes once its pods are gone (strata-agent removes its strata.dev/pods-gone finalizer then); then this Job gets its own",
		},
		"the Job's Workload": {
			err: noWorkloadYet(batchjob.Adapt(job(nil)), explainWorkload()),
		},
		"a cluster without JobSet's CRD": {
			err:  jobReadError(&meta.NoKindMatchError{GroupKind: jobset.Kind.GroupVersionKind().GroupKind(), SearchedVersions: []string{"v1alpha2"}}, jobset.Kind, "the hub"),
			want: "the hub does not serve jobsets.jobset.x-k8s.io (jobset.x-k8s.io/v1alpha2): its CRD is not installed there, so Strata runs no JobSets on it",
		},
		"JobSets forbidden": {
			err:  jobReadError(apierrors.NewForbidden(schema.GroupResource{Group: "jobset.x-k8s.io", Resource: "jobsets"}, "train", errors.New("no")), jobset.Kind, "w1"),
			want: `you may not get jobsets.jobset.x-k8s.io on w1: ask for read access (jobsets.jobset.x-k8s.io "train" is forbidden: no)`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ""
			if tc.err != nil {
				got = tc.err.Error()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("error (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestWriteExplain(t *testing.T) {
	since := minutes(5)
	cases := map[string]struct {
		view ExplainView
		want string
	}{
		"a hub Workload admitted after a refusal": {
			view: ExplainView{
				Role: "hub", Job: ObjectRef{Namespace: "ml", Name: "train"}, Workload: "job-train", Queue: "team-a",
				Admitted: &ConditionView{Status: metav1.ConditionTrue, Reason: "Admitted", Message: "admitted on w2", LastTransitionTime: since},
				Placement: &PlacementView{Cluster: "w2", Flavor: "gpu", DispatchGeneration: 2, Attempts: []AttemptView{
					{Cluster: "w1", Flavor: "gpu", DispatchGeneration: 1, Result: "Rejected", Time: *minutes(10), Message: "the worker's agent refused the copy: LocalQueue team-a does not exist in namespace ml on w1, create it there"},
					{Cluster: "w2", Flavor: "gpu", DispatchGeneration: 2, Result: "Admitted", Time: *minutes(5)},
				}},
				Admission: &AdmissionView{ClusterQueue: "cq", PodSets: []PodSetAdmissionView{{
					Name: "main", Flavor: "gpu", Count: 6, Levels: []string{blockLevel, rackLevel},
					Domains: []AssignedDomainView{{Values: []string{"block-1", "rack-1"}, Pods: 4}, {Values: []string{"block-1", "rack-2"}, Pods: 2}},
				}}},
			},
			want: `Job:        ml/train
Workload:   job-train (on the hub)
Queue:      team-a
Admitted:   True  Admitted (for 5m)
            admitted on w2
Placement:  w2, flavor gpu (dispatch generation 2)
  #1 w1/gpu Rejected 10m ago: the worker's agent refused the copy: LocalQueue team-a does not exist
      in namespace ml on w1, create it there
  #2 w2/gpu Admitted 5m ago
Admission:  ClusterQueue cq
  main: 6 pods on flavor gpu, in 2 rack domains (block > rack)
    block-1/rack-1  4 pods
    block-1/rack-2  2 pods
`,
		},
		"a hub Workload whose pod sets are on different flavors, and its copy": {
			view: ExplainView{
				Role: "hub", Job: ObjectRef{Namespace: "ml", Name: "train"}, Workload: "jobset-train", Queue: "team-a",
				Placement: &PlacementView{Cluster: "w1", Flavor: "cpu", PodSetFlavors: "driver=cpu,workers=gpu", DispatchGeneration: 1},
				Dispatch:  &DispatchView{Origin: "strata-hub", HubWorkloadUID: "hub-uid", Generation: "1", PodSetFlavors: "driver=cpu,workers=gpu"},
			},
			want: `Job:        ml/train
Workload:   jobset-train (on the hub)
Queue:      team-a
Admitted:   Unknown (no condition yet)
Dispatch:   copy of hub Workload hub-uid (dispatch 1) from hub strata-hub; pod sets pinned to
            flavors: driver=cpu,workers=gpu
Placement:  w1, pod sets on flavors driver=cpu,workers=gpu (dispatch generation 1)
`,
		},
		"a hub Workload deleted, waiting for its copy": {
			view: ExplainView{
				Role: "hub", Job: ObjectRef{Namespace: "ml", Name: "train"}, Workload: "job-train", Queue: "team-a",
				Deleting:  "it goes once its copy on w1 is gone or known stopped there",
				Placement: &PlacementView{Cluster: "w1", Flavor: "gpu", DispatchGeneration: 1},
			},
			want: `Job:        ml/train
Workload:   job-train (on the hub)
Queue:      team-a
Deleting:   it goes once its copy on w1 is gone or known stopped there
Admitted:   Unknown (no condition yet)
Placement:  w1, flavor gpu (dispatch generation 1)
`,
		},
		"a hub Workload that fits nowhere now": {
			view: ExplainView{
				Role: "hub", Job: ObjectRef{Namespace: "ml", Name: "big"}, Workload: "job-big", Queue: "team-a",
				Admitted: &ConditionView{Status: metav1.ConditionFalse, Reason: "Pending", LastTransitionTime: minutes(2),
					Message: "fits nowhere now: w1/a100: rack required: the best rack holds 6 of 8 pods; limited by nvidia.com/gpu (3 nodes); w2/h100: summary stale"},
				Placement: &PlacementView{},
			},
			want: `Job:        ml/big
Workload:   job-big (on the hub)
Queue:      team-a
Admitted:   False  Pending (for 2m)
            fits nowhere now: w1/a100: rack required: the best rack holds 6 of 8 pods; limited by
            nvidia.com/gpu (3 nodes); w2/h100: summary stale
Placement:  waiting on the hub, never dispatched
`,
		},
		"a hub Workload sent to preempt on one worker": {
			view: ExplainView{
				Role: "hub", Job: ObjectRef{Namespace: "ml", Name: "urgent"}, Workload: "job-urgent", Queue: "team-a",
				Admitted: &ConditionView{Status: metav1.ConditionFalse, Reason: "Dispatched", LastTransitionTime: minutes(1),
					Message: "dispatched to w3 (flavor gpu); waiting for the worker to admit it."},
				Placement: &PlacementView{Cluster: "w3", Flavor: "gpu", DispatchGeneration: 1, PreemptUpTo: ptr.To[int32](10)},
			},
			want: `Job:        ml/urgent
Workload:   job-urgent (on the hub)
Queue:      team-a
Admitted:   False  Dispatched (for 60s)
            dispatched to w3 (flavor gpu); waiting for the worker to admit it.
Placement:  w3, flavor gpu (dispatch generation 1)
            fits nowhere as the fleet stands: w3 preempts workloads of priority ≤ 10 for it
`,
		},
		"a worker's Workload on hosts": {
			view: ExplainView{
				Role: "worker", Job: ObjectRef{Namespace: "ml", Name: "train"}, Workload: "job-train", Queue: "team-a",
				Admitted: &ConditionView{Status: metav1.ConditionTrue, Reason: "Admitted"},
				PodsReady: &ConditionView{Status: metav1.ConditionFalse, Reason: "WaitForStart", LastTransitionTime: minutes(3),
					Message: "14 of 16 pod(s) ready or succeeded, waiting for the rest"},
				RequeueState: &strata.RequeueState{Count: ptr.To[int32](1)},
				Admission: &AdmissionView{ClusterQueue: "cq", PodSets: []PodSetAdmissionView{{
					Name: "main", Flavor: "gpu", Count: 16, Levels: []string{strata.HostnameLabel},
					Domains: []AssignedDomainView{{Values: []string{"node-1"}, Pods: 8}, {Values: []string{"node-12"}, Pods: 8}},
				}}},
			},
			want: `Job:        ml/train
Workload:   job-train (on the worker)
Queue:      team-a
Admitted:   True  Admitted
Pods ready: False  WaitForStart (for 3m)
            14 of 16 pod(s) ready or succeeded, waiting for the rest
Requeued:   1 time(s) for pods not ready in time
Admission:  ClusterQueue cq
  main: 16 pods on flavor gpu, on 2 hosts
    node-1   8 pods
    node-12  8 pods
`,
		},
		"an elastic Job's Workload waiting to scale up": {
			view: ExplainView{
				Role: "worker", Job: ObjectRef{Namespace: "ml", Name: "elastic"}, Workload: "job-elastic", Queue: "team-a",
				Admitted: &ConditionView{Status: metav1.ConditionTrue, Reason: "Admitted"},
				Resized: &ConditionView{Status: metav1.ConditionFalse, Reason: "Pending", LastTransitionTime: minutes(1),
					Message: "scaling up from 2 to 12 pods: flavor gpu: quota: cpu needs 10, more than is left of the quota of 10"},
			},
			want: `Job:        ml/elastic
Workload:   job-elastic (on the worker)
Queue:      team-a
Admitted:   True  Admitted
Resized:    False  Pending (for 60s)
            scaling up from 2 to 12 pods: flavor gpu: quota: cpu needs 10, more than is left of the
            quota of 10
`,
		},
		"a worker's Workload waiting for its admission checks": {
			view: ExplainView{
				Role: "worker", Job: ObjectRef{Namespace: "ml", Name: "train"}, Workload: "job-train", Queue: "team-a",
				Admitted: &ConditionView{Status: metav1.ConditionFalse, Reason: strata.WaitingForAdmissionChecks, LastTransitionTime: minutes(2),
					Message: "quota reserved; waiting for admission checks budget, capacity to be Ready"},
				QuotaReserved: &ConditionView{Status: metav1.ConditionTrue, Reason: "QuotaReserved", LastTransitionTime: minutes(2),
					Message: "quota reserved by ClusterQueue cq on flavor gpu"},
				Checks: []CheckView{
					{Name: "budget", State: "Ready", LastTransitionTime: minutes(1)},
					{Name: "capacity", State: "Pending", LastTransitionTime: minutes(2), Message: "provisioning 2 nodes"},
				},
				Admission: &AdmissionView{ClusterQueue: "cq", PodSets: []PodSetAdmissionView{{
					Name: "main", Flavor: "gpu", Count: 16, DelayedTopologyRequest: string(strata.DelayedTopologyRequestPending),
				}}},
			},
			want: `Job:        ml/train
Workload:   job-train (on the worker)
Queue:      team-a
Admitted:   False  WaitingForAdmissionChecks (for 2m)
            quota reserved; waiting for admission checks budget, capacity to be Ready
Reserved:   True  QuotaReserved (for 2m)
            quota reserved by ClusterQueue cq on flavor gpu
  check budget: Ready (for 60s)
  check capacity: Pending (for 2m): provisioning 2 nodes
Admission:  ClusterQueue cq
  main: 16 pods on flavor gpu, its topology assigned once every admission check is Ready (delayed for a ProvisioningRequest)
`,
		},
		"a worker's Workload preempted, and its preemptor": {
			view: ExplainView{
				Role: "worker", Job: ObjectRef{Namespace: "ml", Name: "sweep"}, Workload: "job-sweep", Queue: "team-a",
				Priority: &PriorityView{Value: 10, Class: "low", Source: strata.WorkloadPriorityClassSource},
				Admitted: &ConditionView{Status: metav1.ConditionFalse, Reason: "Pending", Message: "preempted to make room for ml/job-train; waits until that workload is admitted"},
				Evicted:  &ConditionView{Status: metav1.ConditionTrue, Reason: "Preempted", Message: "preempted to make room for ml/job-train (priority 1000) of ClusterQueue team-a: withinClusterQueue: LowerPriority"},
				Preempted: &ConditionView{Status: metav1.ConditionTrue, Reason: strata.PreemptedInClusterQueue,
					Message: "preempted to make room for ml/job-train (priority 1000) of ClusterQueue team-a: withinClusterQueue: LowerPriority"},
			},
			want: `Job:        ml/sweep
Workload:   job-sweep (on the worker)
Queue:      team-a
Priority:   10 (WorkloadPriorityClass low)
Admitted:   False  Pending
            preempted to make room for ml/job-train; waits until that workload is admitted
Evicted:    True  Preempted
            preempted to make room for ml/job-train (priority 1000) of ClusterQueue team-a:
            withinClusterQueue: LowerPriority
Preempted:  True  InClusterQueue
            preempted to make room for ml/job-train (priority 1000) of ClusterQueue team-a:
            withinClusterQueue: LowerPriority
`,
		},
		"a worker's Workload whose take-back waits for a pod": {
			view: ExplainView{
				Role: "worker", Job: ObjectRef{Namespace: "ml", Name: "train"}, Workload: "job-train", Queue: "team-a",
				Admitted: &ConditionView{Status: metav1.ConditionTrue, Reason: "Admitted"},
				CopyGoing: &ConditionView{Status: metav1.ConditionTrue, Reason: "WaitingForPods",
					Message: "taking the copy back from w2: it is placed again once its pods are gone there; waiting for train-0 (Terminating since 2026-11-28T16:40:00Z, node n1)"},
			},
			want: `Job:        ml/train
Workload:   job-train (on the worker)
Queue:      team-a
Admitted:   True  Admitted
Copy going: True  WaitingForPods
            taking the copy back from w2: it is placed again once its pods are gone there; waiting
            for train-0 (Terminating since 2026-11-28T16:40:00Z, node n1)
`,
		},
		"a hub Workload whose worker does not answer": {
			view: ExplainView{
				Role: "hub", Job: ObjectRef{Namespace: "ml", Name: "train"}, Workload: "job-train", Queue: "team-a",
				Admitted: &ConditionView{Status: metav1.ConditionTrue, Reason: "Admitted"},
				Unreachable: &ConditionView{Status: metav1.ConditionTrue, Reason: "WorkerUnreachable",
					Message: "w1 does not answer; placed elsewhere at 2026-11-28T16:45:00Z unless it answers again"},
				Placement: &PlacementView{Cluster: "w1", Flavor: "gpu", DispatchGeneration: 1},
			},
			want: `Job:        ml/train
Workload:   job-train (on the hub)
Queue:      team-a
Admitted:   True  Admitted
No answer:  True  WorkerUnreachable
            w1 does not answer; placed elsewhere at 2026-11-28T16:45:00Z unless it answers again
Placement:  w1, flavor gpu (dispatch generation 1)
`,
		},
		"a worker's Workload with a time limit, admitted": {
			view: ExplainView{
				Role: "worker", Job: ObjectRef{Namespace: "ml", Name: "boxed"}, Workload: "job-boxed", Queue: "team-a",
				Admitted:  &ConditionView{Status: metav1.ConditionTrue, Reason: "Admitted"},
				TimeLimit: &TimeLimitView{Seconds: 600, AccumulatedSeconds: 60, AdmittedSince: minutes(5)},
			},
			want: `Job:        ml/boxed
Workload:   job-boxed (on the worker)
Queue:      team-a
Admitted:   True  Admitted
Time limit: 10m0s admitted in all (max-exec-time-seconds): 6m0s used, 4m0s left
`,
		},
		"a hub Workload with a time limit, waiting after an admission": {
			view: ExplainView{
				Role: "hub", Job: ObjectRef{Namespace: "ml", Name: "boxed"}, Workload: "job-boxed", Queue: "team-a",
				Admitted:  &ConditionView{Status: metav1.ConditionFalse, Reason: "Pending", Message: "fits on no worker now"},
				TimeLimit: &TimeLimitView{Seconds: 600, AccumulatedSeconds: 700},
			},
			want: `Job:        ml/boxed
Workload:   job-boxed (on the hub)
Queue:      team-a
Admitted:   False  Pending
            fits on no worker now
Time limit: 10m0s admitted in all (max-exec-time-seconds): 11m40s used by earlier admissions, 0s left
Placement:  waiting on the hub, never dispatched
`,
		},
		"a worker's Workload, invalid": {
			view: ExplainView{
				Role: "worker", Job: ObjectRef{Namespace: "ml", Name: "train"}, Workload: "job-train", Queue: "team-a",
				Invalid:        &ConditionView{Status: metav1.ConditionTrue, Reason: "LocalQueueNotFound", Message: "LocalQueue team-a not found"},
				Dispatch:       &DispatchView{Origin: "strata-hub", HubWorkloadUID: "hub-uid", Generation: "2", Flavor: "gpu"},
				UnhealthyNodes: []string{"node-3"},
			},
			want: `Job:        ml/train
Workload:   job-train (on the worker)
Queue:      team-a
Admitted:   Unknown (no condition yet)
Invalid:    True  LocalQueueNotFound
            LocalQueue team-a not found
Dispatch:   copy of hub Workload hub-uid (dispatch 2) from hub strata-hub; flavor pinned: gpu
Unhealthy:  node-3 (replacements being searched)
`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			if err := writeExplain(&out, tc.view, now); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, out.String()); diff != "" {
				t.Errorf("writeExplain (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestParseJobArg(t *testing.T) {
	for arg, want := range map[string]string{
		"train": "Job/train", "job/train": "Job/train", "jobs/train": "Job/train", "job.batch/train": "Job/train", "jobs.batch/train": "Job/train",
		"jobset/two-level": "JobSet/two-level", "jobsets/two-level": "JobSet/two-level",
		"jobset.jobset.x-k8s.io/two-level": "JobSet/two-level", "jobsets.jobset.x-k8s.io/two-level": "JobSet/two-level",
		"mpijob/pi": "MPIJob/pi", "mpijobs/pi": "MPIJob/pi", "mpijob.kubeflow.org/pi": "MPIJob/pi", "mpijobs.kubeflow.org/pi": "MPIJob/pi",
		"lws/tas-example-lws": "LeaderWorkerSet/tas-example-lws (every group)", "leaderworkerset/x": "LeaderWorkerSet/x (every group)",
		"leaderworkersets/x": "LeaderWorkerSet/x (every group)", "leaderworkerset.leaderworkerset.x-k8s.io/x": "LeaderWorkerSet/x (every group)",
		"leaderworkersets.leaderworkerset.x-k8s.io/x": "LeaderWorkerSet/x (every group)",
		"pod/x":     `explain takes a Job (NAME or job/NAME), a JobSet (jobset/NAME), an MPIJob (mpijob/NAME) or a LeaderWorkerSet (lws/NAME), not "pod"`,
		"Job/train": `explain takes a Job (NAME or job/NAME), a JobSet (jobset/NAME), an MPIJob (mpijob/NAME) or a LeaderWorkerSet (lws/NAME), not "Job"`,
	} {
		kind, name, err := parseJobArg(arg)
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			got = kind.GroupVersionKind().Kind + "/" + name
			if _, grouped := kind.(jobs.GroupedWorkloads); grouped {
				got += " (every group)"
			}
		}
		if got != want {
			t.Errorf("parseJobArg(%q) = %s, want %s", arg, got, want)
		}
	}
	if got, want := newExplainCommand().Use, "explain [job/|jobset/|mpijob/|lws/]NAME [-n NAMESPACE] [--kubeconfig FILE] [--context CTX] [-o table|json|yaml]"; got != want {
		t.Errorf("Use = %q, want %q", got, want)
	}
}
