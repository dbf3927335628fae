// Package summary publishes the agent's CapacitySummary objects: one per
// topology-aware flavor, written promptly after capacity changes but at most
// once per configured interval.
package summary

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/agent/cache"
	configv1beta1 "strata.dev/strata/api/config/v1beta1"
	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/metrics"
	"strata.dev/strata/pkg/tas"
)

// Publisher writes CapacitySummary objects. It is a manager Runnable.
type Publisher struct {
	client client.Client
	cache  *cache.Cache
	cfg    configv1beta1.Summary
	clock  clock.Clock
}

// NewPublisher returns a Publisher.
func NewPublisher(c client.Client, cc *cache.Cache, cfg configv1beta1.Summary, clk clock.Clock) *Publisher {
	return &Publisher{client: c, cache: cc, cfg: cfg, clock: clk}
}

// NeedLeaderElection is true: only the leader publishes.
func (p *Publisher) NeedLeaderElection() bool { return true }

// Start publishes after every change, no more often than minInterval.
func (p *Publisher) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("summary")
	changes := p.cache.Subscribe()
	for {
		if err := p.PublishAll(ctx); err != nil && ctx.Err() == nil {
			log.Error(err, "Publishing capacity summaries")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-p.clock.After(p.cfg.MinInterval.Duration):
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changes:
		}
	}
}

// PublishAll writes the summary of every topology-aware flavor.
func (p *Publisher) PublishAll(ctx context.Context) error {
	var errs []error
	for _, name := range p.cache.TASFlavors() {
		errs = append(errs, p.publish(ctx, name))
	}
	return errors.Join(errs...)
}

func (p *Publisher) publish(ctx context.Context, flavor string) error {
	var (
		st     strata.CapacitySummaryStatus
		sumErr error
	)
	if !p.cache.Flavor(flavor, func(s *tas.Snapshot, _ *strata.Topology) {
		st, sumErr = s.Summarize(int(*p.cfg.MaxBytes))
	}) {
		return nil
	}
	var cs strata.CapacitySummary
	err := p.client.Get(ctx, types.NamespacedName{Name: flavor}, &cs)
	if apierrors.IsNotFound(err) {
		cs = strata.CapacitySummary{ObjectMeta: metav1.ObjectMeta{Name: flavor}, Spec: strata.CapacitySummarySpec{Flavor: flavor}}
		err = p.client.Create(ctx, &cs)
	}
	if err != nil {
		return fmt.Errorf("capacity summary %s: %w", flavor, err)
	}
	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Published", Message: "current capacity of the flavor's nodes"}
	if st.Coarsened {
		ready.Message = fmt.Sprintf("free capacity rounded down to stay within %d bytes", *p.cfg.MaxBytes)
	}
	if sumErr != nil {
		ready = metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "TooLarge", Message: sumErr.Error()}
	}
	old := cs.Status
	st.SummaryGeneration = old.SummaryGeneration
	st.ObservedTime = old.ObservedTime
	st.Conditions = old.Conditions
	meta.SetStatusCondition(&st.Conditions, ready)
	if equality.Semantic.DeepEqual(old, st) {
		return nil
	}
	st.SummaryGeneration++
	st.ObservedTime = &metav1.Time{Time: p.clock.Now()}
	cs.Status = st
	if err := p.client.Status().Update(ctx, &cs); err != nil {
		return fmt.Errorf("capacity summary %s: %w", flavor, err)
	}
	record(flavor, &st)
	return nil
}

// record exports a published summary: its size and time, and the free
// capacity per top-level domain.
func record(flavor string, st *strata.CapacitySummaryStatus) {
	if data, err := json.Marshal(st); err == nil {
		metrics.SummaryBytes.WithLabelValues(flavor).Set(float64(len(data)))
	}
	metrics.SummaryTimestamp.WithLabelValues(flavor).Set(float64(st.ObservedTime.Unix()))
	metrics.FreeCapacity.DeletePartialMatch(prometheus.Labels{"flavor": flavor})
	free := map[string][]float64{}
	for _, d := range st.Domains {
		top := "-"
		if len(d.Values) > 0 {
			top = d.Values[0]
		}
		if free[top] == nil {
			free[top] = make([]float64, len(st.Resources))
		}
		for _, b := range d.Buckets {
			for r := range st.Resources {
				free[top][r] += float64(b.Free[r]) / 1000 * float64(b.Nodes)
			}
		}
	}
	for top, amounts := range free {
		for r, name := range st.Resources {
			metrics.FreeCapacity.WithLabelValues(flavor, top, string(name)).Set(amounts[r])
		}
	}
}
