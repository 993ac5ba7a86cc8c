package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
)

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// TestDialCode: each failure a dial meets has its code, wrapped as the WebSocket dialer
// wraps it; an answer without the upgrade is upgrade-refused whatever the error says.
func TestDialCode(t *testing.T) {
	dialErr := func(errno error) error {
		return fmt.Errorf("failed to WebSocket dial: %w", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errno)})
	}
	for _, c := range []struct {
		err  error
		resp *http.Response
		want string
	}{
		{dialErr(syscall.ECONNREFUSED), nil, DialRefused},
		{dialErr(syscall.EHOSTUNREACH), nil, DialUnreachable},
		{dialErr(syscall.ENETUNREACH), nil, DialUnreachable},
		{fmt.Errorf("failed to WebSocket dial: %w", &net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "b.invalid", IsNotFound: true}}), nil, DialDNS},
		{fmt.Errorf("failed to WebSocket dial: %w", context.DeadlineExceeded), nil, DialTimeout},
		{fmt.Errorf("failed to WebSocket dial: %w", &net.OpError{Op: "read", Err: timeoutErr{}}), nil, DialTimeout},
		{errors.New("expected handshake response status code 101 but got 404"), &http.Response{StatusCode: 404}, DialUpgrade},
		{dialErr(syscall.ECONNREFUSED), &http.Response{StatusCode: 503}, DialUpgrade},
		{errors.New("something else"), nil, DialFailed},
	} {
		if got := dialCode(c.err, c.resp); got != c.want {
			t.Errorf("%v (answer %v): %s; want %s", c.err, c.resp != nil, got, c.want)
		}
	}
}
