// Package outbound is the HTTP client for calls to URLs that users configure (agent
// endpoints, webhook and chat destinations). Such URLs are user input: without care they
// let a user make the service call its own loopback, private network or the cloud
// metadata endpoint (SSRF). The client refuses those addresses when it connects, after DNS
// resolution, so a hostname that resolves (or later re-resolves) to one is refused too.
// Operators of self-hosted instances allow chosen ranges with SVC_OUTBOUND_ALLOW.
package outbound

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// EnvAllow is the environment variable operators set to allow ranges (CONTRACT.md §1).
const EnvAllow = "SVC_OUTBOUND_ALLOW"

// ErrForbiddenAddress is matched (errors.Is) by every refusal of the dialer.
var ErrForbiddenAddress = errors.New("forbidden destination address")

// ForbiddenAddressError is a refused connection: which address, and why.
type ForbiddenAddressError struct {
	Addr netip.Addr
	// Kind names the range, e.g. "a loopback address".
	Kind string
}

func (e *ForbiddenAddressError) Error() string {
	return fmt.Sprintf("destination refused: %s is %s; allow it with %s", e.Addr, e.Kind, EnvAllow)
}

// Is makes errors.Is(err, ErrForbiddenAddress) hold.
func (e *ForbiddenAddressError) Is(target error) bool { return target == ErrForbiddenAddress }

// blocked lists the ranges refused by default, most specific first so the message names
// the metadata endpoint rather than "link-local".
var blocked = []struct {
	prefix netip.Prefix
	kind   string
}{
	{netip.MustParsePrefix("169.254.169.254/32"), "a cloud metadata address"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "a cloud metadata address"},
	{netip.MustParsePrefix("0.0.0.0/8"), "an unspecified (\"this network\") address"},
	{netip.MustParsePrefix("::/128"), "an unspecified address"},
	{netip.MustParsePrefix("127.0.0.0/8"), "a loopback address"},
	{netip.MustParsePrefix("::1/128"), "a loopback address"},
	{netip.MustParsePrefix("10.0.0.0/8"), "a private address"},
	{netip.MustParsePrefix("172.16.0.0/12"), "a private address"},
	{netip.MustParsePrefix("192.168.0.0/16"), "a private address"},
	{netip.MustParsePrefix("fc00::/7"), "a private (unique local) address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared (CGNAT) address"},
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local address"},
	{netip.MustParsePrefix("fe80::/10"), "a link-local address"},
	{netip.MustParsePrefix("224.0.0.0/4"), "a multicast address"},
	{netip.MustParsePrefix("ff00::/8"), "a multicast address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved or broadcast address"},
}

// nat64 is the well-known NAT64 prefix: behind a NAT64 gateway 64:ff9b::a.b.c.d reaches
// a.b.c.d, so the embedded IPv4 address is what must be checked.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// CheckAddr returns a *ForbiddenAddressError when addr may not be reached: it is in a
// refused range (IPv4-mapped and NAT64 forms included) and not inside an allowed prefix.
func CheckAddr(addr netip.Addr, allow []netip.Prefix) error {
	addr = addr.WithZone("")
	forms := []netip.Addr{addr, addr.Unmap()}
	if addr.Is6() && nat64.Contains(addr) {
		b := addr.As16()
		forms = append(forms, netip.AddrFrom4([4]byte(b[12:16])))
	}
	for _, p := range allow {
		for _, f := range forms {
			if p.Contains(f) {
				return nil
			}
		}
	}
	for _, f := range forms {
		for _, b := range blocked {
			if b.prefix.Contains(f) {
				return &ForbiddenAddressError{Addr: addr, Kind: b.kind}
			}
		}
	}
	return nil
}

// ParseAllow parses the value of SVC_OUTBOUND_ALLOW: comma-separated CIDRs, or bare IP
// addresses meaning that one address. Empty entries are ignored, so "" allows nothing.
func ParseAllow(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	var errs []error
	for _, raw := range strings.Split(s, ",") {
		entry := strings.TrimSpace(raw)
		if entry == "" {
			continue
		}
		p, err := parseAllowEntry(entry)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, p)
	}
	return out, errors.Join(errs...)
}

func parseAllowEntry(entry string) (netip.Prefix, error) {
	bad := fmt.Errorf("%s entry %q is neither a CIDR (like 127.0.0.0/8 or fd00::/8) nor an IP address", EnvAllow, entry)
	if strings.Contains(entry, "/") {
		p, err := netip.ParsePrefix(entry)
		if err != nil {
			return netip.Prefix{}, bad
		}
		return unmapPrefix(p.Masked()), nil
	}
	a, err := netip.ParseAddr(entry)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, bad
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// unmapPrefix turns ::ffff:10.0.0.0/104 into 10.0.0.0/8, so it matches how CheckAddr
// compares addresses.
func unmapPrefix(p netip.Prefix) netip.Prefix {
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p
}

// CheckURL validates a user-given destination URL before it is saved or called: http or
// https, a host, no credentials. Where it points is checked when connecting (NewClient),
// because a hostname can resolve differently by then. Messages never repeat the URL: it
// may hold secrets, and the caller knows which URL it checked.
func CheckURL(raw string) error {
	if strings.TrimSpace(raw) == "" {
		return errors.New("the URL is empty")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("the URL cannot be parsed (check for spaces or stray characters)")
	}
	switch {
	case u.Scheme == "":
		return errors.New("the URL has no scheme: it must start with https:// or http://")
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("the URL scheme %q is not allowed: use https:// or http://", u.Scheme)
	case u.User != nil:
		return errors.New("the URL must not contain credentials (user:password@); send them in headers instead")
	case u.Opaque != "" || u.Hostname() == "":
		return errors.New("the URL has no host: write it like https://agent.example.com/path")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("the URL has an invalid port %q", p)
		}
	}
	return nil
}

// Options of NewClient.
type Options struct {
	// AllowCIDRs are ranges that may be reached although they are refused by default.
	AllowCIDRs []netip.Prefix
	// Timeout bounds a whole request, answer body included (0: none; callers then bound
	// each request with its context).
	Timeout time.Duration
}

// NewClient returns an HTTP client that connects only to allowed addresses, does not
// follow redirects (a redirect could lead anywhere; the caller gets the 3xx) and ignores
// proxy environment variables (through a proxy, the dialer would check the proxy's
// address instead of the destination's).
func NewClient(o Options) *http.Client {
	allow := append([]netip.Prefix(nil), o.AllowCIDRs...)
	dialer := &net.Dialer{
		Timeout:   10 * time.Second,
		KeepAlive: 30 * time.Second,
		Control:   control(allow),
	}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
	}
	return &http.Client{
		Transport: tr,
		Timeout:   o.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// control runs for every address the dialer is about to connect to, after resolution:
// the one place where the real destination is known, whatever DNS answered.
func control(allow []netip.Prefix) func(network, address string, _ syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: cannot check %q (%s)", ErrForbiddenAddress, address, network)
		}
		return CheckAddr(ap.Addr(), allow)
	}
}
