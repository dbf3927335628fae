package workercluster

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func TestRecentSecrets(t *testing.T) {
	ctx := context.Background()
	key := client.ObjectKey{Namespace: "strata-system", Name: "w1-kubeconfig"}
	c := fake.NewClientBuilder().WithObjects(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
		Data: map[string][]byte{"kubeconfig": []byte("first")}}).Build()
	reads := 0
	counted := interceptor.NewClient(c, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		reads++
		return c.Get(ctx, key, obj, opts...)
	}})
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	s := newRecentSecrets(counted, clk, 5*time.Second)
	get := func() string {
		t.Helper()
		var secret corev1.Secret
		if err := s.Get(ctx, key, &secret); err != nil {
			t.Fatal(err)
		}
		return string(secret.Data["kubeconfig"])
	}
	rotate := func(data string) {
		t.Helper()
		var secret corev1.Secret
		if err := c.Get(ctx, key, &secret); err != nil {
			t.Fatal(err)
		}
		secret.Data["kubeconfig"] = []byte(data)
		if err := c.Update(ctx, &secret); err != nil {
			t.Fatal(err)
		}
	}

	type step struct {
		Data  string
		Reads int
	}
	var got []step
	got = append(got, step{get(), reads}) // read
	clk.SetTime(clk.Now().Add(4 * time.Second))
	rotate("second")
	got = append(got, step{get(), reads}) // within the interval: as read
	clk.SetTime(clk.Now().Add(time.Second))
	got = append(got, step{get(), reads}) // the interval is over: read anew
	got = append(got, step{get(), reads})
	s.sawOwner("w1", "generation 1")
	got = append(got, step{get(), reads}) // its WorkerCluster first seen: read anew
	rotate("third")
	s.sawOwner("w1", "generation 1")
	got = append(got, step{get(), reads}) // the same WorkerCluster: as read
	s.sawOwner("w1", "generation 1, labelled")
	got = append(got, step{get(), reads}) // its WorkerCluster changed: read anew
	want := []step{{"first", 1}, {"first", 1}, {"second", 2}, {"second", 2}, {"second", 3}, {"second", 3}, {"third", 4}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(data, reads) after each Get (-want,+got):\n%s", diff)
	}

	// A Secret gone is read anew each time once its interval is over, and
	// its absence is not kept.
	if err := c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(clk.Now().Add(5 * time.Second))
	for range 2 {
		if err := s.Get(ctx, key, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("Get() = %v, want NotFound", err)
		}
	}
	if reads != 6 {
		t.Errorf("reads = %d, want 6 (4 before): a missing Secret is asked for again", reads)
	}
}
