package fleet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strings"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Outcome is what a failed request to a worker's API server says of its
// effect there.
type Outcome int

const (
	// NotSent means the request provably never reached the worker's API server
	// (the connection was refused, the name did not resolve, the TLS
	// handshake failed before anything was sent).
	NotSent Outcome = iota
	// Refused means the API server answered and did not carry the request out
	// (a 4xx answer other than a timeout).
	Refused
	// Unknown means the request may have been carried out (a timeout after it
	// was sent, a connection lost mid-way, a server error).
	Unknown
)

// previousAttempt is how client-go's retries name an earlier attempt's
// error in the one they return.
const previousAttempt = " - error from a previous attempt: "

func (o Outcome) String() string {
	switch o {
	case NotSent:
		return "NotSent"
	case Refused:
		return "Refused"
	}
	return "Unknown"
}

// RequestOutcome says what err, returned by a write to a worker, says of
// the write's effect. Only what is certain counts as NotSent or Refused:
// anything else may have been carried out.
func RequestOutcome(err error) Outcome {
	if err == nil {
		return Unknown // not a failure: it may well have been carried out
	}
	if strings.Contains(err.Error(), previousAttempt) {
		// client-go retried after a 5xx or 429 answer: an earlier attempt
		// may have been carried out, whatever the last one says.
		return Unknown
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		switch {
		case apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || code == 0 || code >= 500:
			return Unknown
		case code == 429:
			return Refused // throttled before it was looked at
		case code >= 400:
			return Refused
		}
		return Unknown
	}
	var opErr *net.OpError
	dial := errors.As(err, &opErr) && opErr.Op == "dial"
	// A refused connection is a connect's error only; an unreachable host
	// or network may also end a connection the request was sent on.
	if errors.Is(err, syscall.ECONNREFUSED) || dial && (errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH)) {
		return NotSent
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return NotSent
	}
	if dial && !errors.Is(err, context.DeadlineExceeded) && !opErr.Timeout() {
		return NotSent
	}
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var recordHeader tls.RecordHeaderError
	var certVerify *tls.CertificateVerificationError
	if errors.As(err, &unknownAuthority) || errors.As(err, &hostname) || errors.As(err, &invalid) ||
		errors.As(err, &recordHeader) || errors.As(err, &certVerify) {
		return NotSent
	}
	return Unknown
}
