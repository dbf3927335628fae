// Package scheme builds the runtime.Scheme every Strata binary uses: the
// Kubernetes built-in kinds plus strata.dev/v1beta1.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	strataapi "strata.dev/strata/api/v1beta1"
)

// New returns a scheme with the built-in kinds and Strata's kinds.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(strataapi.AddToScheme(s))
	return s
}
