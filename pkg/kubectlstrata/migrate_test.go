package kubectlstrata

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDecodeObjects: documents and lists; a typed list's items take its
// apiVersion and kind, as the API server returns them without.
func TestDecodeObjects(t *testing.T) {
	in := `apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueueList
items:
- metadata: {name: a}
- metadata: {name: b}
---
apiVersion: v1
kind: List
items:
- {apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {name: lq, namespace: ml}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f}
`
	objs, err := decodeObjects([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.GetAPIVersion()+" "+o.GetKind()+" "+o.GetName())
	}
	want := []string{
		"kueue.x-k8s.io/v1beta2 ClusterQueue a",
		"kueue.x-k8s.io/v1beta2 ClusterQueue b",
		"kueue.x-k8s.io/v1beta2 LocalQueue lq",
		"kueue.x-k8s.io/v1beta2 ResourceFlavor f",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
}
