package fleet

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestRequestOutcome: only an error that proves the request never reached
// the worker, or that the worker turned it down, is taken as such.
func TestRequestOutcome(t *testing.T) {
	gr := schema.GroupResource{Group: "batch", Resource: "jobs"}
	post := func(err error) error {
		return &url.Error{Op: "Post", URL: "https://w1:6443/apis/batch/v1/namespaces/a/jobs", Err: err}
	}
	cases := map[string]struct {
		err  error
		want Outcome
	}{
		"connection refused":                 {post(&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}), NotSent},
		"no route to host":                   {post(&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.EHOSTUNREACH)}), NotSent},
		"DNS":                                {post(&net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "w1"}}), NotSent},
		"no route to host once sent":         {post(&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.EHOSTUNREACH)}), Unknown},
		"a certificate of another authority": {post(fmt.Errorf("tls: failed to verify certificate: %w", x509.UnknownAuthorityError{})), NotSent},
		"a dial that timed out":              {post(&net.OpError{Op: "dial", Net: "tcp", Err: context.DeadlineExceeded}), Unknown},
		"a timeout after sending":            {post(context.DeadlineExceeded), Unknown},
		"the connection lost mid-way":        {post(io.ErrUnexpectedEOF), Unknown},
		"connection reset":                   {post(&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}), Unknown},
		"the server's timeout":               {apierrors.NewTimeoutError("request timed out", 1), Unknown},
		"a server error":                     {apierrors.NewInternalError(errors.New("etcd leader changed")), Unknown},
		"unavailable":                        {apierrors.NewServiceUnavailable("shutting down"), Unknown},
		"forbidden":                          {apierrors.NewForbidden(gr, "train", errors.New("no")), Refused},
		"namespace not found":                {apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "a"), Refused},
		"throttled":                          {apierrors.NewTooManyRequests("slow down", 1), Refused},
		"invalid":                            {apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, "train", nil), Refused},
		"anything else":                      {errors.New("something"), Unknown},
		"no error":                           {nil, Unknown},
		"refused after a retried server error": {fmt.Errorf("%w - error from a previous attempt: the server is currently unable to handle the request",
			post(&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)})), Unknown},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := RequestOutcome(tc.err); got != tc.want {
				t.Errorf("RequestOutcome(%v) = %s, want %s", tc.err, got, tc.want)
			}
		})
	}
}

// TestRenewalFailure: only an error that proves the Lease was not written
// is a failure; a renewal without an error is none.
func TestRenewalFailure(t *testing.T) {
	if _, certain := renewalFailure(nil); certain {
		t.Error("renewalFailure(nil): want no failure")
	}
	gr := schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	st, certain := renewalFailure(apierrors.NewForbidden(gr, "strata-fence-hub", errors.New("no")))
	if !certain || st.reason != "Forbidden" || st.failed == "" {
		t.Errorf("renewalFailure(Forbidden) = %+v, %t; want a certain Forbidden failure", st, certain)
	}
	if _, certain := renewalFailure(context.DeadlineExceeded); certain {
		t.Error("renewalFailure(timeout): want an unknown outcome, not a failure")
	}
	// A read before the write failed: nothing was written, whatever the
	// read's own outcome.
	st, certain = renewalFailure(notWritten{context.DeadlineExceeded})
	if !certain || st.reason != ReasonRenewalUnreachable {
		t.Errorf("renewalFailure(a read timed out before the write) = %+v, %t; want a certain failure, reason %s", st, certain, ReasonRenewalUnreachable)
	}
	st, certain = renewalFailure(notWritten{apierrors.NewServiceUnavailable("etcd")})
	if !certain || st.reason != "ServiceUnavailable" {
		t.Errorf("renewalFailure(a read refused before the write) = %+v, %t; want a certain ServiceUnavailable failure", st, certain)
	}
	st, certain = renewalFailure(notWritten{fmt.Errorf("worker w1: %w", ErrClusterChanged)})
	if !certain || st.reason != ReasonClusterChanged {
		t.Errorf("renewalFailure(another cluster) = %+v, %t; want a certain failure, reason %s", st, certain, ReasonClusterChanged)
	}
}
