package queue

import (
	"cmp"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
)

// AdmissionFairSharing is Kueue's admission fair sharing (KEP-4136) at
// the ClusterQueue scope: each LocalQueue's consumed usage is an
// exponentially decayed average of what its admitted workloads hold, and
// a ClusterQueue whose admissionScope is UsageBasedAdmissionFairSharing
// serves first the workloads of the LocalQueue with the lowest weighted
// usage, then by priority and age (Compare). The zero value is off.
type AdmissionFairSharing struct {
	// HalfLife: a sample moves the consumed usage towards the usage of
	// the moment by 1 - 0.5^(elapsed/HalfLife); 0 takes the usage of the
	// moment.
	HalfLife time.Duration
	// Interval is the time between samples.
	Interval time.Duration
	// Weights weigh resources when usages are compared; unlisted: 1.
	Weights map[corev1.ResourceName]float64
	on      bool
}

// NewAdmissionFairSharing returns the configuration's admission fair
// sharing; nil configuration: off.
func NewAdmissionFairSharing(cfg *configv1beta1.AdmissionFairSharing) AdmissionFairSharing {
	if cfg == nil {
		return AdmissionFairSharing{}
	}
	a := AdmissionFairSharing{HalfLife: cfg.UsageHalfLifeTime.Duration, Weights: cfg.ResourceWeights, on: true}
	if cfg.UsageSamplingInterval != nil {
		a.Interval = cfg.UsageSamplingInterval.Duration
	}
	return a
}

// On says whether admission fair sharing is configured.
func (a AdmissionFairSharing) On() bool { return a.on }

// Orders says whether a ClusterQueue orders its workloads by their
// LocalQueues' usage.
func (a AdmissionFairSharing) Orders(cq *strata.ClusterQueue) bool {
	return a.on && cq != nil && cq.Spec.AdmissionScope != nil && cq.Spec.AdmissionScope.AdmissionMode == strata.UsageBasedAdmissionFairSharing
}

// alpha is how far a sample taken elapsed after the previous one moves
// the consumed usage towards the usage of the moment.
func (a AdmissionFairSharing) alpha(elapsed time.Duration) float64 {
	if a.HalfLife <= 0 {
		return 1
	}
	if elapsed <= 0 {
		return 0
	}
	return 1 - math.Pow(0.5, elapsed.Seconds()/a.HalfLife.Seconds())
}

// Sample is the consumed usage after a sample of current taken elapsed
// after the one that gave prev; amounts are kept to the milli-unit, and
// resources that come to 0 are left out.
func (a AdmissionFairSharing) Sample(prev, current corev1.ResourceList, elapsed time.Duration) corev1.ResourceList {
	return a.blend(prev, current, a.alpha(elapsed))
}

// Penalty is what admitting a workload that holds requests adds to its
// LocalQueue's consumed usage until the next sample counts the workload
// (Kueue's entry penalty): what one sample interval would add.
func (a AdmissionFairSharing) Penalty(requests corev1.ResourceList) corev1.ResourceList {
	return a.blend(nil, requests, a.alpha(a.Interval))
}

func (a AdmissionFairSharing) blend(prev, current corev1.ResourceList, alpha float64) corev1.ResourceList {
	out := corev1.ResourceList{}
	add := func(r corev1.ResourceName) {
		if _, done := out[r]; done {
			return
		}
		p, c := prev[r], current[r]
		v := (1-alpha)*float64(p.MilliValue()) + alpha*float64(c.MilliValue())
		if m := int64(math.Round(v)); m > 0 {
			out[r] = *resource.NewMilliQuantity(m, quantityFormat(r, c, p))
		} else {
			out[r] = resource.Quantity{}
		}
	}
	for r := range prev {
		add(r)
	}
	for r := range current {
		add(r)
	}
	for r, q := range out {
		if q.IsZero() {
			delete(out, r)
		}
	}
	return out
}

func quantityFormat(r corev1.ResourceName, qs ...resource.Quantity) resource.Format {
	for _, q := range qs {
		if q.Format != "" {
			return q.Format
		}
	}
	if r == corev1.ResourceMemory || r == corev1.ResourceEphemeralStorage {
		return resource.BinarySI
	}
	return resource.DecimalSI
}

// Usage is a LocalQueue's weighted usage: the sum over resources of
// consumed plus penalty (cores for cpu, bytes for memory, units
// otherwise) times the resource's weight, divided by the queue's
// fairSharing.weight. A weight of 0 makes any usage infinite.
func (a AdmissionFairSharing) Usage(lq *strata.LocalQueue, penalty corev1.ResourceList) float64 {
	var sum float64
	add := func(rl corev1.ResourceList) {
		for r, q := range rl {
			w, ok := a.Weights[r]
			if !ok {
				w = 1
			}
			sum += w * q.AsApproximateFloat64()
		}
	}
	if lq != nil {
		if fs := lq.Status.FairSharing; fs != nil && fs.AdmissionFairSharingStatus != nil {
			add(fs.AdmissionFairSharingStatus.ConsumedResources)
		}
	}
	add(penalty)
	w := 1.0
	if lq != nil && lq.Spec.FairSharing != nil && lq.Spec.FairSharing.Weight != nil {
		w = lq.Spec.FairSharing.Weight.AsApproximateFloat64()
	}
	switch {
	case sum == 0:
		return 0
	case w <= 0:
		return math.Inf(1)
	}
	return sum / w
}

// CompareByUsage orders a ClusterQueue's workloads under admission fair
// sharing: the lower usage of its LocalQueue first (usage: see Usage),
// then Compare.
func CompareByUsage(usage func(*strata.Workload) float64) func(a, b *strata.Workload) int {
	return func(a, b *strata.Workload) int {
		if c := cmp.Compare(usage(a), usage(b)); c != 0 {
			return c
		}
		return Compare(a, b)
	}
}

// Penalties are what a process admitted (or dispatched) from each
// LocalQueue after its last usage sample (Kueue's entry penalties): they
// count until a later sample, which includes those workloads. A process
// keeps one across its passes.
type Penalties map[types.NamespacedName]penalty

type penalty struct {
	sampledAt time.Time
	amount    corev1.ResourceList
}

// UsagePass is the usage of LocalQueues in one pass of a scheduler:
// each read once (get), with the penalties of the process.
type UsagePass struct {
	afs       AdmissionFairSharing
	get       func(types.NamespacedName) *strata.LocalQueue
	penalties Penalties
	lqs       map[types.NamespacedName]*strata.LocalQueue
	values    map[types.NamespacedName]float64
}

// NewPass starts a pass: get reads a LocalQueue (nil when it is gone).
func (a AdmissionFairSharing) NewPass(get func(types.NamespacedName) *strata.LocalQueue, penalties Penalties) *UsagePass {
	return &UsagePass{afs: a, get: get, penalties: penalties,
		lqs: map[types.NamespacedName]*strata.LocalQueue{}, values: map[types.NamespacedName]float64{}}
}

func sampledAt(lq *strata.LocalQueue) time.Time {
	if fs := lq.Status.FairSharing; fs != nil && fs.AdmissionFairSharingStatus != nil {
		return fs.AdmissionFairSharingStatus.LastUpdate.Time
	}
	return time.Time{}
}

func (p *UsagePass) localQueue(wl *strata.Workload) (types.NamespacedName, *strata.LocalQueue) {
	key := Key(wl)
	lq, ok := p.lqs[key]
	if !ok {
		lq = p.get(key)
		p.lqs[key] = lq
		if pen, ok := p.penalties[key]; ok && (lq == nil || !pen.sampledAt.Equal(sampledAt(lq))) {
			delete(p.penalties, key) // sampled since
		}
	}
	return key, lq
}

// Usage is the usage of a workload's LocalQueue (AdmissionFairSharing.Usage
// with its penalty).
func (p *UsagePass) Usage(wl *strata.Workload) float64 {
	key, lq := p.localQueue(wl)
	v, ok := p.values[key]
	if !ok {
		v = p.afs.Usage(lq, p.penalties[key].amount)
		p.values[key] = v
	}
	return v
}

// Compare is CompareByUsage with the pass's usage.
func (p *UsagePass) Compare(a, b *strata.Workload) int {
	return CompareByUsage(p.Usage)(a, b)
}

// Admitted counts an admitted (or dispatched) workload against its
// LocalQueue: its Penalty, until the next sample.
func (p *UsagePass) Admitted(wl *strata.Workload) {
	key, lq := p.localQueue(wl)
	if lq == nil {
		return
	}
	pen := p.penalties[key]
	pen.sampledAt = sampledAt(lq)
	pen.amount = AddLists(pen.amount, p.afs.Penalty(WorkloadUsage(wl)))
	p.penalties[key] = pen
	delete(p.values, key)
}

// AddLists returns a + b, a new list.
func AddLists(a, b corev1.ResourceList) corev1.ResourceList {
	out := a.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	for r, q := range b {
		sum := out[r]
		sum.Add(q)
		out[r] = sum
	}
	return out
}

// CurrentUsage is what a LocalQueue's workloads hold now: the quota
// usage (WorkloadUsage) of those admitted and not finished.
func CurrentUsage(wls []*strata.Workload) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, wl := range wls {
		if wl.Status.Admission != nil && !meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished) {
			out = AddLists(out, WorkloadUsage(wl))
		}
	}
	return out
}

// NextFairSharingStatus is a LocalQueue's fair-sharing status after a
// sample at now of its workloads' current usage, and when the next sample
// is due. A queue without one starts from nothing consumed one interval
// before now: its first sample counts what its workloads hold as their
// entry penalties did (Penalty), which that sample ends, so that a
// queue's first admissions do not drop out of its usage until the second
// sample. Before the interval has passed since the last sample, the
// status is kept.
func (a AdmissionFairSharing) NextFairSharingStatus(prev *strata.LocalQueueFairSharingStatus, current corev1.ResourceList, now time.Time) (*strata.LocalQueueFairSharingStatus, time.Duration) {
	if prev == nil || prev.AdmissionFairSharingStatus == nil || prev.AdmissionFairSharingStatus.LastUpdate.IsZero() {
		return &strata.LocalQueueFairSharingStatus{AdmissionFairSharingStatus: &strata.AdmissionFairSharingStatus{
			ConsumedResources: a.Sample(nil, current, a.Interval),
			LastUpdate:        metav1.NewTime(now.Truncate(time.Second)),
		}}, a.Interval
	}
	last := prev.AdmissionFairSharingStatus.LastUpdate.Time
	elapsed := now.Sub(last)
	if elapsed < a.Interval {
		return prev, a.Interval - elapsed
	}
	return &strata.LocalQueueFairSharingStatus{AdmissionFairSharingStatus: &strata.AdmissionFairSharingStatus{
		ConsumedResources: a.Sample(prev.AdmissionFairSharingStatus.ConsumedResources, current, elapsed),
		LastUpdate:        metav1.NewTime(now.Truncate(time.Second)),
	}}, a.Interval
}
