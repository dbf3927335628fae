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
	// owners is, per WorkerCluster, its metadata when last seen
	// (sawOwner).
	owners map[string]string
}

type readSecret struct {
	secret *corev1.Secret
	at     time.Time
}

func newRecentSecrets(r client.Reader, clk clock.PassiveClock, ttl time.Duration) *recentSecrets {
	return &recentSecrets{r: r, clock: clk, ttl: ttl, read: map[types.NamespacedName]readSecret{}, owners: map[string]string{}}
}

// sawOwner notes the metadata of WorkerCluster name (its generation,
// labels and annotations, as one string) as a reconcile reads it. When
// it changed since the last reconcile, the Secrets read are read anew: an
// admin who changes a WorkerCluster after its Secret (a rotated
// credential, then a label) sees the new credential used at once, not up
// to ttl later.
func (s *recentSecrets) sawOwner(name, meta string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owners[name] != meta {
		s.owners[name] = meta
		clear(s.read)
	}
}

// forgetOwner drops what sawOwner noted of WorkerCluster name.
func (s *recentSecrets) forgetOwner(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.owners, name)
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
