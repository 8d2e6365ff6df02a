package webhook

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestDescribeErrorHidesInternalAddresses: what a tenant reads about a
// failed attempt names the failure and their host, never the resolver's
// or the guard's view of internal addresses.
func TestDescribeErrorHidesInternalAddresses(t *testing.T) {
	t.Parallel()
	wrap := func(err error) error { return &url.Error{Op: "Post", URL: "https://hooks.example/x", Err: err} }
	dial := func(err error) error {
		return wrap(&net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 9, 8, 7), Port: 443}, Err: err})
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{wrap(&net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "hooks.example", Server: "10.0.0.53:53", IsNotFound: true}}),
			"host hooks.example not found"},
		{wrap(&net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "server misbehaving", Name: "hooks.example", Server: "10.0.0.53:53"}}),
			"could not resolve host hooks.example"},
		{dial(fmt.Errorf("%w: 10.9.8.7", ErrForbiddenAddress)), "destination address not allowed"},
		{dial(os.NewSyscallError("connect", syscall.ECONNREFUSED)), "connection refused"},
		{dial(&timeoutErr{}), "timed out connecting"},
		{wrap(context.DeadlineExceeded), "timed out waiting for a response"},
	} {
		got := describeError(c.err)
		if !strings.HasPrefix(got, c.want) {
			t.Errorf("%v: %q, want %q", c.err, got, c.want)
		}
		for _, leak := range []string{"10.0.0.53", "10.9.8.7", "Post "} {
			if strings.Contains(got, leak) {
				t.Errorf("%q shows %q", got, leak)
			}
		}
	}
}

type timeoutErr struct{}

func (*timeoutErr) Error() string   { return "i/o timeout" }
func (*timeoutErr) Timeout() bool   { return true }
func (*timeoutErr) Temporary() bool { return true }
