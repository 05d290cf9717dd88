package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Browser sessions. The dashboard never holds a login token: logging in sets a cookie
// the page script cannot read (HttpOnly), the browser sends only to this origin's
// top-level navigations and same-site requests (SameSite=Strict), and only over HTTPS
// when the page came over HTTPS (Secure). The cookie's value is a random secret stored
// as its hash and checked on every request, so logging out ends it at once.

// SessionKind prefixes a session secret, so one is recognised if it leaks; the API does
// not take it as a Bearer token.
const SessionKind = "oss_"

// SessionTTL is how long a browser session lasts before logging in again.
const SessionTTL = 7 * 24 * time.Hour

// Cookie names: over HTTPS the __Host- prefix makes the browser refuse a cookie that is
// not Secure, has a Domain, or a Path other than / (so a sibling subdomain cannot plant
// one). Browsers refuse Secure cookies on plain http, so http keeps a plain name.
const (
	cookieSecure = "__Host-svc_session"
	cookiePlain  = "svc_session"
)

// CSRFHeader carries the session's CSRF token on cookie-authenticated writes.
const CSRFHeader = "X-CSRF-Token"

// IsHTTPS reports whether the client reached us over HTTPS (directly, or through a
// TLS-terminating proxy that says so).
func IsHTTPS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// SessionCookie is the cookie that carries secret.
func SessionCookie(r *http.Request, secret string) *http.Cookie {
	c := &http.Cookie{Name: cookiePlain, Value: secret, Path: "/", MaxAge: int(SessionTTL / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode}
	if IsHTTPS(r) {
		c.Name, c.Secure = cookieSecure, true
	}
	return c
}

// ClearSessionCookie is the cookie that makes the browser forget the session.
func ClearSessionCookie(r *http.Request) *http.Cookie {
	c := SessionCookie(r, "")
	c.MaxAge = -1
	return c
}

// SessionFromCookie returns the session secret the request carries, "" when none.
func SessionFromCookie(r *http.Request) string {
	names := []string{cookiePlain}
	if IsHTTPS(r) {
		// Over HTTPS only the __Host- cookie counts: a plain one could have been set by
		// a plain-http response (or a sibling subdomain).
		names = []string{cookieSecure}
	}
	for _, n := range names {
		if c, err := r.Cookie(n); err == nil && strings.HasPrefix(c.Value, SessionKind) {
			return c.Value
		}
	}
	return ""
}

// CSRFToken is the token a session's writes must carry in CSRFHeader: an HMAC of the
// session's secret under the deployment's key, so it needs no storage, differs per
// session and cannot be derived without the secret or the key.
func (t *Tokens) CSRFToken(sessionSecret string) string {
	m := hmac.New(sha256.New, t.secret)
	m.Write([]byte("csrf\x00" + sessionSecret))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// CheckCSRF accepts a cookie-authenticated write only when it carries the session's
// CSRF token and, where the browser says where the request came from, that is this
// origin. SameSite=Strict alone is not enough: every port of a host is the same *site*,
// so a page served by the receiver (another port) would send the cookie along.
func (t *Tokens) CheckCSRF(r *http.Request, sessionSecret string) error {
	if err := CheckSameOrigin(r); err != nil {
		return err
	}
	got := r.Header.Get(CSRFHeader)
	if got == "" || !hmac.Equal([]byte(got), []byte(t.CSRFToken(sessionSecret))) {
		return errors.New("the " + CSRFHeader + " header is missing or wrong")
	}
	return nil
}

// CheckSameOrigin refuses a request the browser says came from another origin (before
// there is a session, e.g. logging in: a page elsewhere must not sign a visitor into an
// account of its choosing). Clients that are not browsers send neither header.
func CheckSameOrigin(r *http.Request) error {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return errors.New("the request came from another site (Sec-Fetch-Site: " + site + ")")
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		scheme := "http"
		if IsHTTPS(r) {
			scheme = "https"
		}
		if err != nil || u.Scheme != scheme || !strings.EqualFold(u.Host, r.Host) {
			return errors.New("the request came from another origin (" + o + ")")
		}
	}
	return nil
}
