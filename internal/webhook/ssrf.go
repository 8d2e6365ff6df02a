package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"
)

// ErrForbiddenAddress: a webhook URL resolved to an address the SSRF guard
// refuses (loopback, private, link-local or another special range).
var ErrForbiddenAddress = errors.New("webhook destination address is not allowed")

// special are ranges beyond netip's predicates that must never be reached
// from a tenant-supplied URL (RFC 6890 and friends).
var special = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	// IPv6 forms that embed an IPv4 address the kernel may route to it
	// (::127.0.0.1 reached loopback), in every spelling netip parses.
	netip.MustParsePrefix("::/96"),           // IPv4-compatible (deprecated), ::, ::1
	netip.MustParsePrefix("::ffff:0:0/96"),   // IPv4-mapped (Unmap catches the usual spelling)
	netip.MustParsePrefix("::ffff:0:0:0/96"), // IPv4-translated (SIIT)
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64 could reach private IPv4
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("2002::/16"), // 6to4 embeds IPv4
	netip.MustParsePrefix("2001::/32"), // Teredo embeds IPv4
	netip.MustParsePrefix("100::/64"),  // discard-only
	netip.MustParsePrefix("2001::/23"), // IETF protocol assignments
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("fec0::/10"), // site-local (deprecated, still routed inside some sites)
}

// Guard decides which resolved addresses webhooks may connect to. It runs
// in net.Dialer.Control, after DNS resolution, so a name that resolves (or
// rebinds) to an internal address is refused.
type Guard struct {
	// Allow opens ranges despite the rules (JEJAK_WEBHOOK_ALLOW_CIDRS), for
	// development and tests.
	Allow []netip.Prefix
	// AllowAddrs opens single address and port pairs (the demo's own
	// receiver): a range would open every other service on that host too.
	AllowAddrs []netip.AddrPort
}

// ParseAllowCIDRs reads a comma-separated list of CIDRs (or single
// addresses).
func ParseAllowCIDRs(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !strings.Contains(p, "/") {
			a, err := netip.ParseAddr(p)
			if err != nil {
				return nil, fmt.Errorf("%q is not a CIDR or address", p)
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		pr, err := netip.ParsePrefix(p)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR: %w", p, err)
		}
		out = append(out, pr.Masked())
	}
	return out, nil
}

// Allowed reports whether ip may be dialled.
func (g Guard) Allowed(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, p := range g.Allow {
		if p.Contains(ip) {
			return true
		}
	}
	if !ip.IsValid() || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() || !ip.IsGlobalUnicast() {
		return false
	}
	for _, p := range special {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// Control is a net.Dialer.Control refusing forbidden addresses.
func (g Guard) Control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrForbiddenAddress, address)
	}
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	if slices.Contains(g.AllowAddrs, ap) {
		return nil
	}
	if !g.Allowed(ap.Addr()) {
		return fmt.Errorf("%w: %s", ErrForbiddenAddress, ap.Addr())
	}
	return nil
}

// ConnectTimeout bounds the TCP connect of an attempt, far below Timeout:
// an endpoint that does not even accept connections gives its worker back
// in seconds.
const ConnectTimeout = 3 * time.Second

// MaxResponseHeader caps the response headers read from a receiver.
const MaxResponseHeader = 64 << 10

// Client returns the HTTP client deliveries use: dial-time SSRF guard, no
// proxy (a proxy would dial for us, past the guard), redirects not
// followed (the 3xx is the answer), ConnectTimeout to connect, Timeout per
// attempt, response headers capped.
func (g Guard) Client() *http.Client {
	d := &net.Dialer{Timeout: ConnectTimeout, Control: g.Control}
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            d.DialContext,
		TLSHandshakeTimeout:    5 * time.Second,
		ResponseHeaderTimeout:  Timeout,
		MaxResponseHeaderBytes: MaxResponseHeader,
		MaxIdleConns:           100,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        90 * time.Second,
	}
	return &http.Client{
		Transport:     tr,
		Timeout:       Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// describeError says why an attempt failed in words a tenant may read:
// what went wrong and with which host, never the resolver's or a proxy's
// internal address, nor Go's wrapping of the request.
func describeError(err error) string {
	var dnsErr *net.DNSError
	var opErr *net.OpError
	switch {
	case errors.Is(err, ErrForbiddenAddress):
		return "destination address not allowed (private, loopback or reserved range)"
	case errors.As(err, &dnsErr):
		if dnsErr.IsNotFound {
			return "host " + dnsErr.Name + " not found"
		}
		return "could not resolve host " + dnsErr.Name
	case errors.Is(err, context.DeadlineExceeded) || os.IsTimeout(err):
		if errors.As(err, &opErr) && opErr.Op == "dial" {
			return fmt.Sprintf("timed out connecting (after %s)", ConnectTimeout)
		}
		return fmt.Sprintf("timed out waiting for a response (after %s)", Timeout)
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset by the receiver"
	case errors.As(err, new(*tls.CertificateVerificationError)):
		return "TLS certificate not trusted"
	case errors.As(err, &opErr):
		return "connection failed: " + opErr.Err.Error()
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err.Error()
	}
	return err.Error()
}
