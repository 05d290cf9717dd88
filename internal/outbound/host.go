package outbound

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ErrInvalidHost is matched (errors.Is) when a host looks like a numeric address but is
// not a valid one (1.2.3.999, 0x1.0x2.0x3.0x4.5): such hosts are refused, never resolved.
var ErrInvalidHost = errors.New("invalid numeric host")

// ParseHost reads a URL's host (url.URL.Hostname: no brackets, no port) the way browsers
// do (the WHATWG URL standard's IPv4 parser), so that every spelling of an address is
// judged as that address: 2130706433, 0x7f.1, 0177.0.0.1, 127.1 and 127.0.0.1. are all
// 127.0.0.1. Handed to the system resolver as names, the C library's inet_aton would
// quietly make those addresses of them, past any check that saw only a name.
//
// It returns the address and true for an IP address in any form; false for a name (the
// name, lowercased and without a trailing dot, is returned in name); an error wrapping
// ErrInvalidHost for a host whose last label is a number but which is no IPv4 address.
// net/netip has no parser for these legacy forms, hence this one.
func ParseHost(host string) (addr netip.Addr, name string, isAddr bool, err error) {
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	if strings.Contains(host, ":") {
		a, err := netip.ParseAddr(host)
		if err != nil {
			return netip.Addr{}, "", false, fmt.Errorf("%w: %q is not a valid IPv6 address", ErrInvalidHost, host)
		}
		return a, "", true, nil
	}
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if h == "" {
		return netip.Addr{}, "", false, fmt.Errorf("%w: the host is empty", ErrInvalidHost)
	}
	labels := strings.Split(h, ".")
	if !numericLabel(labels[len(labels)-1]) {
		return netip.Addr{}, h, false, nil
	}
	a, ok := parseIPv4(labels)
	if !ok {
		return netip.Addr{}, "", false, fmt.Errorf("%w: %q looks like an IPv4 address but is not a valid one", ErrInvalidHost, host)
	}
	return a, "", true, nil
}

// numericLabel tells whether a label is a number in the WHATWG sense ("ends in a number"):
// decimal digits, or 0x followed by hexadecimal digits.
func numericLabel(l string) bool {
	if l == "" {
		return false
	}
	if strings.HasPrefix(l, "0x") {
		for _, c := range l[2:] {
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
		return true
	}
	for _, c := range l {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// parseIPv4 is the WHATWG IPv4 parser: one to four labels, each decimal, octal (leading
// 0) or hexadecimal (0x); every label but the last is one byte, the last fills the
// remaining bytes.
func parseIPv4(labels []string) (netip.Addr, bool) {
	if len(labels) > 4 {
		return netip.Addr{}, false
	}
	var v uint64
	for i, l := range labels {
		n, ok := parseIPv4Number(l)
		if !ok {
			return netip.Addr{}, false
		}
		if i < len(labels)-1 {
			if n > 255 {
				return netip.Addr{}, false
			}
			v = v<<8 | n
			continue
		}
		rest := 8 * uint(5-len(labels)) // bits the last label fills
		if n >= 1<<rest {
			return netip.Addr{}, false
		}
		v = v<<rest | n
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

func parseIPv4Number(l string) (uint64, bool) {
	base := 10
	switch {
	case l == "":
		return 0, false
	case strings.HasPrefix(l, "0x"):
		base, l = 16, l[2:]
		if l == "" {
			return 0, true // "0x" is 0 for browsers
		}
	case len(l) > 1 && l[0] == '0':
		base, l = 8, l[1:]
	}
	n, err := strconv.ParseUint(l, base, 32)
	return n, err == nil
}

// normalizingDial puts the address a numeric host means in place of its spelling before
// dialing, so such hosts never reach the resolver; control then checks the address.
func normalizingDial(dial func(ctx context.Context, network, address string) (net.Conn, error)) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(address)
		if err != nil {
			return nil, fmt.Errorf("%w: cannot check %q", ErrForbiddenAddress, address)
		}
		a, _, isAddr, err := ParseHost(host)
		switch {
		case err != nil:
			// Both: callers treat a forbidden destination as final, not worth a retry.
			return nil, fmt.Errorf("%w: %w", ErrForbiddenAddress, err)
		case isAddr:
			address = net.JoinHostPort(a.String(), port)
		}
		return dial(ctx, network, address)
	}
}

// saveTimeLookup bounds the name resolution of CheckDestination.
const saveTimeLookup = 3 * time.Second

// CheckDestination is the check made when a destination URL is saved: CheckURL, then
// where the host points. An address in any spelling, a localhost name, or a name any of
// whose addresses is refused (CheckAddr) gives a *ForbiddenAddressError naming
// SVC_OUTBOUND_ALLOW. The connect-time check stays (NewClient): DNS can answer
// differently later.
//
// A name that does not resolve (or not within 3 s) is accepted: it may be created after
// the destination (a new agent's DNS record), or resolve only where the data plane runs
// (split-horizon DNS), and refusing it would add no safety, since whoever controls a name
// can point it anywhere after the save; the connect-time check is what holds then.
// resolver nil means net.DefaultResolver.
func CheckDestination(ctx context.Context, raw string, allow []netip.Prefix, resolver *net.Resolver) error {
	if err := CheckURL(raw); err != nil {
		return err
	}
	u, _ := url.Parse(raw) // CheckURL parsed it
	a, name, isAddr, err := ParseHost(u.Hostname())
	if err != nil {
		return err
	}
	if isAddr {
		return CheckAddr(a, allow)
	}
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		// RFC 6761: always loopback, whatever a resolver says.
		if err := CheckAddr(netip.IPv6Loopback(), allow); err != nil {
			if err := CheckAddr(netip.AddrFrom4([4]byte{127, 0, 0, 1}), allow); err != nil {
				err.(*ForbiddenAddressError).Host = name
				return err
			}
		}
		return nil
	}
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	ctx, cancel := context.WithTimeout(ctx, saveTimeLookup)
	defer cancel()
	addrs, err := resolver.LookupNetIP(ctx, "ip", name)
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if err := CheckAddr(a, allow); err != nil {
			err.(*ForbiddenAddressError).Host = name
			return err
		}
	}
	return nil
}
