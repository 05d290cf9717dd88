package auth

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ParseTrustedProxies reads SVC_TRUSTED_PROXIES: CIDRs or single addresses, separated by
// commas or spaces, of the reverse proxies whose X-Forwarded-For is believed.
func ParseTrustedProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("SVC_TRUSTED_PROXIES: %q is neither a CIDR (10.0.0.0/8) nor an address", f)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// ClientAddr is the address of the client that sent r. The peer's address, unless the
// peer is a trusted proxy: then X-Forwarded-For is walked from the right (the hop each
// proxy appended last), skipping trusted proxies, and the first address that is not one
// is the client. Everything left of it was written by the client and is not believed, so
// a client cannot pick the address its requests are counted under. A peer that is not
// trusted is the client whatever it sends.
func ClientAddr(r *http.Request, trusted []netip.Prefix) string {
	peer := r.RemoteAddr
	if host, _, err := net.SplitHostPort(peer); err == nil {
		peer = host
	}
	a, err := netip.ParseAddr(peer)
	if err != nil || !isTrusted(a, trusted) {
		return peer
	}
	hops := forwardedFor(r)
	client := a
	for i := len(hops) - 1; i >= 0; i-- {
		h, ok := parseHop(hops[i])
		if !ok {
			// Not an address a proxy writes: the hop before it is as far as is known.
			break
		}
		client = h
		if !isTrusted(h, trusted) {
			break
		}
	}
	return client.String()
}

// ForwardedByUntrusted reports whether r carries X-Forwarded-For from a peer that is not
// a trusted proxy: a sign that the deployment's proxy is missing from SVC_TRUSTED_PROXIES.
func ForwardedByUntrusted(r *http.Request, trusted []netip.Prefix) (peer string, yes bool) {
	if len(r.Header.Values("X-Forwarded-For")) == 0 {
		return "", false
	}
	peer = r.RemoteAddr
	if host, _, err := net.SplitHostPort(peer); err == nil {
		peer = host
	}
	a, err := netip.ParseAddr(peer)
	return peer, err != nil || !isTrusted(a, trusted)
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	a = a.Unmap().WithZone("")
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// forwardedFor is every X-Forwarded-For entry, in order, across repeated headers.
func forwardedFor(r *http.Request) []string {
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		for _, h := range strings.Split(v, ",") {
			hops = append(hops, strings.TrimSpace(h))
		}
	}
	return hops
}

// parseHop reads one X-Forwarded-For entry: an address, or one with a port
// ("192.0.2.1:4711", "[2001:db8::1]:4711"), as some proxies write.
func parseHop(h string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().WithZone(""), true
	}
	if ap, err := netip.ParseAddrPort(h); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	return netip.Addr{}, false
}
