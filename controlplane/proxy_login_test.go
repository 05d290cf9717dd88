package main

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStrangerCannotLockTheOwnerOut: behind a reverse proxy in SVC_TRUSTED_PROXIES every
// request comes from the proxy's address, yet an attacker's wrong passwords lock out only
// the attacker's address (the one the proxy saw, X-Forwarded-For's rightmost untrusted
// hop), not the owner's; a client cannot pick its address by writing the header itself.
// And where attacker and owner do share an address (a NAT, or a proxy missing from the
// setting), the owner's browser that logged in before still gets in with the password.
func TestStrangerCannotLockTheOwnerOut(t *testing.T) {
	s := startStack(t, map[string]string{"SVC_DATA_DIR": t.TempDir(), "SVC_TRUSTED_PROXIES": "127.0.0.1/32"})
	cp := s.cp.URL
	s.signup(t, "owner@example.com")
	proxy := from("127.0.0.1")
	viaProxy := func(client, password string) reply {
		t.Helper()
		req := map[string]string{"email": "owner@example.com", "password": password}
		r := callWithHeader(t, proxy, cp, "/api/v1/auth/login", req, "X-Forwarded-For", client)
		return r
	}
	for i := range 10 {
		r := viaProxy("203.0.113.66", "guess "+strconv.Itoa(i))
		require.Equal(t, http.StatusUnauthorized, r.Status, "guess %d: %s", i, r.Raw)
	}
	r := viaProxy("203.0.113.66", "guess 11")
	assert.Equal(t, http.StatusTooManyRequests, r.Status, "the guesser is throttled")
	assert.Equal(t, "rate_limited", r.code())
	assert.NotEmpty(t, r.Header.Get("Retry-After"))
	r = viaProxy("10.9.9.9, 203.0.113.66", "guess 12")
	assert.Equal(t, http.StatusTooManyRequests, r.Status, "an address the client wrote itself changes nothing")

	r = viaProxy("198.51.100.7", "correct horse battery")
	assert.Equal(t, http.StatusOK, r.Status, "the owner, behind the same proxy, logs in: %s", r.Raw)

	// A peer that is no trusted proxy is counted as itself, whatever it claims.
	direct := from("127.0.0.2")
	for i := range 10 {
		r := callWithHeader(t, direct, cp, "/api/v1/auth/login", map[string]string{"email": "owner@example.com", "password": "nope " + strconv.Itoa(i)},
			"X-Forwarded-For", "198.51.100.7")
		require.Equal(t, http.StatusUnauthorized, r.Status, "%s", r.Raw)
	}
	r = viaProxy("198.51.100.7", "correct horse battery")
	assert.Equal(t, http.StatusOK, r.Status, "a stranger naming the owner's address did not lock it: %s", r.Raw)

	// Owner and attacker behind one NAT address (127.0.0.3): the owner's browser logged in
	// once, then the attacker used up the address's tries for the account.
	b := newBrowser(t, cp)
	b.client.Transport = from("127.0.0.3").Transport
	creds := map[string]string{"email": "owner@example.com", "password": "correct horse battery"}
	require.Equal(t, http.StatusOK, b.do("POST", "/api/v1/auth/session", creds, false).Status)
	nat := from("127.0.0.3")
	for i := range 11 {
		callWith(t, nat, cp, "POST", "/api/v1/auth/login", "", map[string]string{"email": "owner@example.com", "password": "nat guess " + strconv.Itoa(i)})
	}
	r = callWith(t, nat, cp, "POST", "/api/v1/auth/login", "", creds)
	require.Equal(t, http.StatusTooManyRequests, r.Status, "without the browser's cookie the address is throttled for the account")
	r = b.do("POST", "/api/v1/auth/session", creds, false)
	assert.Equal(t, http.StatusOK, r.Status, "the owner's browser still logs in: %s", r.Raw)
	for i := range 10 {
		r = b.do("POST", "/api/v1/auth/session", map[string]string{"email": "owner@example.com", "password": "wrong " + strconv.Itoa(i)}, false)
		require.Equal(t, http.StatusUnauthorized, r.Status)
	}
	r = b.do("POST", "/api/v1/auth/session", creds, false)
	assert.Equal(t, http.StatusTooManyRequests, r.Status, "a stolen device cookie buys ten guesses, no more")
}

// callWithHeader POSTs body as JSON through client with one extra header.
func callWithHeader(t *testing.T, client *http.Client, base, path string, body any, name, value string) reply {
	t.Helper()
	return callWith(t, &http.Client{Transport: headerTransport{client.Transport, name, value}}, base, "POST", path, "", body)
}

type headerTransport struct {
	next        http.RoundTripper
	name, value string
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.name, h.value)
	return h.next.RoundTrip(r)
}
