package dispatch

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	strata "strata.dev/strata/api/v1beta1"
)

// MinSigningKeyBytes is the shortest copy-signing key the hub accepts.
const MinSigningKeyBytes = 32

// signedFields is what a copy's signature covers: who made it (origin),
// what it is (kind, namespace, name) and which dispatch it is a copy of
// (hub Workload UID, generation). A signature moved to another object,
// another kind or another dispatch does not verify.
func signedFields(gk schema.GroupKind, obj metav1.Object) string {
	l := obj.GetLabels()
	return strings.Join([]string{
		"strata.dev/copy/v1",
		l[strata.OriginLabel],
		gk.String(),
		obj.GetNamespace(),
		obj.GetName(),
		l[strata.HubWorkloadUIDLabel],
		l[strata.DispatchGenerationLabel],
	}, "\x00")
}

func signature(key []byte, gk schema.GroupKind, obj metav1.Object) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(signedFields(gk, obj)))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// Sign puts the hub's signature on a copy of kind gk, made by NewCopy:
// its labels and name are final.
func Sign(key []byte, gk schema.GroupKind, obj metav1.Object) {
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[strata.CopySignatureAnnotation] = signature(key, gk, obj)
	obj.SetAnnotations(a)
}

// Signed says whether obj, of kind gk, carries a signature made with key
// for its own origin, name and dispatch: whether the hub holding key
// made it.
func Signed(key []byte, gk schema.GroupKind, obj metav1.Object) bool {
	got, ok := obj.GetAnnotations()[strata.CopySignatureAnnotation]
	if !ok || len(key) == 0 {
		return false
	}
	want := signature(key, gk, obj)
	return hmac.Equal([]byte(got), []byte(want))
}
