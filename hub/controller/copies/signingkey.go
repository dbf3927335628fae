package copies

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/hub/dispatch"
)

// SigningKeySecret is the Secret, in the hub's namespace, that holds the
// key the hub signs its copies with (key "key"). The hub creates it on
// first use; every replica and every later process reads the same one.
// Deleting it makes the hub's earlier copies unsigned to it: they are
// then recognised by the hub's records only (docs/reliability.md).
const SigningKeySecret = "strata-hub-copy-signing"

// signingKeyField is the Secret's data key.
const signingKeyField = "key"

// +kubebuilder:rbac:groups="",namespace=strata-system,resources=secrets,verbs=create

// signingKey reads the copy-signing key from its Secret, creating the
// Secret with a random key when there is none, and keeps it once read.
type signingKey struct {
	reader    client.Reader // the API server, not an informer: no Secret cache
	writer    client.Client
	namespace string

	mu  sync.Mutex
	key []byte
}

func newSigningKey(w client.Client, r client.Reader, namespace string) *signingKey {
	return &signingKey{reader: r, writer: w, namespace: namespace}
}

// Get returns the key; an error says what could not be read or made.
func (s *signingKey) Get(ctx context.Context) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.key != nil {
		return s.key, nil
	}
	name := types.NamespacedName{Namespace: s.namespace, Name: SigningKeySecret}
	for range 2 {
		var secret corev1.Secret
		err := s.reader.Get(ctx, name, &secret)
		if err == nil {
			k := secret.Data[signingKeyField]
			if len(k) < dispatch.MinSigningKeyBytes {
				return nil, fmt.Errorf("the copy-signing key in Secret %s (data %q) has %d bytes, fewer than %d: delete the Secret and the hub makes a new one",
					name, signingKeyField, len(k), dispatch.MinSigningKeyBytes)
			}
			s.key = k
			return k, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading the copy-signing key Secret %s: %w", name, err)
		}
		k := make([]byte, dispatch.MinSigningKeyBytes)
		if _, err := rand.Read(k); err != nil {
			return nil, err
		}
		err = s.writer.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: SigningKeySecret,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "strata-hub"}},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{signingKeyField: k},
		})
		if err == nil {
			s.key = k
			return k, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating the copy-signing key Secret %s (the hub needs create on Secrets in its namespace %s, and that namespace): %w", name, s.namespace, err)
		}
		// Another replica made it first: read that one.
	}
	return nil, fmt.Errorf("the copy-signing key Secret %s was created and is gone again", name)
}
