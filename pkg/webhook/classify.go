package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/evfwd/evfwd/internal/retry"
)

// classifyStatus maps an HTTP status to its class and outcome (DESIGN §4).
func classifyStatus(code int) (Class, Outcome) {
	switch {
	case code >= 200 && code < 300:
		return ClassOK, Delivered
	case code >= 300 && code < 400:
		return ClassRedirect, Final
	case code == http.StatusRequestTimeout:
		return ClassRequestTimeout, Retryable
	case code == http.StatusTooManyRequests:
		return ClassTooManyRequests, Retryable
	case code >= 400 && code < 500:
		return ClassClientError, Final
	case code >= 500 && code < 600:
		return ClassServerError, Retryable
	}
	return ClassOtherStatus, Final
}

// classifyError maps a transport error. parent is the caller's context,
// attempt the per-attempt one derived from it.
func classifyError(parent, attempt context.Context, err error, timeout time.Duration) (Class, Outcome, error) {
	switch {
	case parent.Err() != nil:
		return ClassCanceled, Interrupted, parent.Err()
	case errors.Is(err, ErrBlockedAddress):
		return ClassBlocked, Final, err
	case isTLS(err):
		return ClassTLS, TLSError, err
	case attempt.Err() != nil || isTimeout(err):
		return ClassTimeout, Retryable, fmt.Errorf("%w (%s)", errTimeout, timeout)
	case retry.Refused(err):
		return ClassRefused, Retryable, err
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		// EOF: the server closed the connection without an answer.
		return ClassReset, Retryable, err
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return ClassDNS, Retryable, err
	}
	return ClassNetwork, Retryable, err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// isTLS reports a failed handshake or an untrusted certificate.
func isTLS(err error) bool {
	var (
		verr  *tls.CertificateVerificationError
		uaerr x509.UnknownAuthorityError
		herr  x509.HostnameError
		cerr  x509.CertificateInvalidError
		rerr  tls.RecordHeaderError
		aerr  tls.AlertError
		eerr  *tls.ECHRejectionError
	)
	return errors.As(err, &verr) || errors.As(err, &uaerr) || errors.As(err, &herr) ||
		errors.As(err, &cerr) || errors.As(err, &rerr) || errors.As(err, &aerr) || errors.As(err, &eerr)
}
