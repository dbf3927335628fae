package workercluster

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// secretRecheck is how long a Secret read from the API server is used
// again before it is read anew. Every change of a worker's summaries
// reconciles its WorkerCluster, several times a second on a busy worker,
// and each read the worker's kubeconfig Secret from the API server (the
// hub does not watch Secrets): about one read per worker per second in a
// busy fleet. A rotated kubeconfig is now picked up at the first
// reconcile after this interval.
const secretRecheck = 5 * time.Second

// recentSecrets is a client.Reader that answers a Get of a Secret read
// less than ttl ago from that read, and reads everything else through r.
type recentSecrets struct {
	r     client.Reader
	clock clock.PassiveClock
	ttl   time.Duration

	mu   sync.Mutex
	read map[types.NamespacedName]readSecret
}

type readSecret struct {
	secret *corev1.Secret
	at     time.Time
}

func newRecentSecrets(r client.Reader, clk clock.PassiveClock, ttl time.Duration) *recentSecrets {
	return &recentSecrets{r: r, clock: clk, ttl: ttl, read: map[types.NamespacedName]readSecret{}}
}

// Get implements client.Reader.
func (s *recentSecrets) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	out, ok := obj.(*corev1.Secret)
	if !ok {
		return s.r.Get(ctx, key, obj, opts...)
	}
	now := s.clock.Now()
	s.mu.Lock()
	last, found := s.read[key]
	s.mu.Unlock()
	if found && now.Sub(last.at) < s.ttl {
		last.secret.DeepCopyInto(out)
		return nil
	}
	if err := s.r.Get(ctx, key, out, opts...); err != nil {
		s.mu.Lock()
		delete(s.read, key)
		s.mu.Unlock()
		return err
	}
	s.mu.Lock()
	s.read[key] = readSecret{secret: out.DeepCopy(), at: now}
	s.mu.Unlock()
	return nil
}

// List implements client.Reader; lists are not kept.
func (s *recentSecrets) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return s.r.List(ctx, list, opts...)
}
