// Package outbound is the HTTP client for calls to URLs that users configure (agent
// endpoints, webhook and chat destinations). Such URLs are user input: without care they
// let a user make the service call its own loopback, private network or the cloud
// metadata endpoint (SSRF). The client refuses those addresses when it connects, after DNS
// resolution, so a hostname that resolves (or later re-resolves) to one is refused too;
// numeric host spellings (2130706433, 0x7f.1, 127.1) are read as the address they mean
// before that (ParseHost). The control plane checks the same when a URL is saved
// (CheckDestination). Operators of self-hosted instances allow chosen ranges with
// SVC_OUTBOUND_ALLOW.
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
	// Host is the name that resolved to Addr, when the URL held a name (CheckDestination).
	Host string
}

func (e *ForbiddenAddressError) Error() string {
	if e.Host != "" {
		return fmt.Sprintf("destination refused: %s resolves to %s, which is %s; allow it with %s", e.Host, e.Addr, e.Kind, EnvAllow)
	}
	return fmt.Sprintf("destination refused: %s is %s; allow it with %s", e.Addr, e.Kind, EnvAllow)
}

// Is makes errors.Is(err, ErrForbiddenAddress) hold.
func (e *ForbiddenAddressError) Is(target error) bool { return target == ErrForbiddenAddress }

// blocked lists the ranges refused by default: the IANA IPv4 and IPv6 Special-Purpose
// Address Registries (RFC 6890 and their later entries) except the blocks marked
// globally reachable, plus the cloud metadata addresses. Most specific first, so the
// message names the metadata endpoint rather than "link-local". Blocks that carry an IPv4
// address (IPv4-mapped, IPv4-compatible, NAT64 64:ff9b::/96, 6to4 2002::/16) are not
// listed: they are judged by the IPv4 address they carry (embeddedIPv4).
var blocked = []struct {
	prefix netip.Prefix
	kind   string
}{
	{netip.MustParsePrefix("169.254.169.254/32"), "a cloud metadata address"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "a cloud metadata address"},
	// Azure's platform endpoint (wireserver): a public address that answers only from
	// inside Azure, with instance secrets.
	{netip.MustParsePrefix("168.63.129.16/32"), "a cloud metadata address"},
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
	{netip.MustParsePrefix("fec0::/10"), "a site-local address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol assignment address"},
	{netip.MustParsePrefix("2001::/23"), "an IETF protocol assignment address (Teredo, benchmarking, ORCHID)"},
	{netip.MustParsePrefix("192.0.2.0/24"), "a documentation address"},
	{netip.MustParsePrefix("198.51.100.0/24"), "a documentation address"},
	{netip.MustParsePrefix("203.0.113.0/24"), "a documentation address"},
	{netip.MustParsePrefix("2001:db8::/32"), "a documentation address"},
	{netip.MustParsePrefix("3fff::/20"), "a documentation address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("192.88.99.0/24"), "a 6to4 relay anycast address"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a local-use NAT64 address"},
	{netip.MustParsePrefix("100::/64"), "a discard-only address"},
	{netip.MustParsePrefix("5f00::/16"), "an SRv6 segment identifier"},
	{netip.MustParsePrefix("224.0.0.0/4"), "a multicast address"},
	{netip.MustParsePrefix("ff00::/8"), "a multicast address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved or broadcast address"},
}

// Blocks of IPv6 addresses that carry an IPv4 address. Behind a NAT64 gateway
// 64:ff9b::a.b.c.d reaches a.b.c.d, a 6to4 relay sends 2002:AABB:CCDD:: to AA.BB.CC.DD,
// and stacks may turn IPv4-mapped and the deprecated IPv4-compatible forms into IPv4, so
// each is what the IPv4 address it carries is.
var (
	nat64      = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour  = netip.MustParsePrefix("2002::/16")
	compatIPv4 = netip.MustParsePrefix("::/96")
)

// embeddedIPv4 returns the IPv4 address an IPv6 address carries, if it is of one of the
// forms above.
func embeddedIPv4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	switch {
	case a.Is4In6():
		return a.Unmap(), true
	case nat64.Contains(a), compatIPv4.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

// CheckAddr returns a *ForbiddenAddressError when addr may not be reached: it is in a
// refused range, or carries an IPv4 address that is (see embeddedIPv4), and neither it
// nor that IPv4 address is inside an allowed prefix.
func CheckAddr(addr netip.Addr, allow []netip.Prefix) error {
	addr = addr.WithZone("")
	forms := []netip.Addr{addr}
	if v4, ok := embeddedIPv4(addr); ok {
		forms = append(forms, v4)
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
		DialContext:           normalizingDial(dialer.DialContext),
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
