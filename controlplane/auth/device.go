package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Device cookies (OWASP's "Slow Down Online Guessing Attacks with Device Cookies"): a
// browser that logged in to an account gets a cookie naming that account, and its later
// logins to the account are throttled per cookie rather than per client address. So
// failures from an address (anyone's, or a proxy's that every client shares) never stop
// the account's owner on a browser they have logged in from before; a guesser without the
// cookie is throttled per address as before, and one who stole a cookie gets ten tries.

// DeviceTTL is how long a device cookie is honoured after the login that set it.
const DeviceTTL = 180 * 24 * time.Hour

const (
	deviceSecure = "__Host-svc_device"
	devicePlain  = "svc_device"
)

// DeviceCookie is the cookie that marks this browser as one that logged in as email.
func (t *Tokens) DeviceCookie(r *http.Request, email string, now time.Time) *http.Cookie {
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		panic(err)
	}
	n := base64.RawURLEncoding.EncodeToString(nonce[:])
	payload := n + "." + strconv.FormatInt(now.Add(DeviceTTL).Unix(), 10)
	c := &http.Cookie{Name: devicePlain, Value: payload + "." + t.deviceMAC(email, payload), Path: "/",
		MaxAge: int(DeviceTTL / time.Second), HttpOnly: true, SameSite: http.SameSiteStrictMode}
	if IsHTTPS(r) {
		c.Name, c.Secure = deviceSecure, true
	}
	return c
}

// Device returns the id of the request's device cookie when it was set by a login as
// email and has not expired; ok is false otherwise.
func (t *Tokens) Device(r *http.Request, email string, now time.Time) (id string, ok bool) {
	for _, name := range []string{deviceSecure, devicePlain} {
		c, err := r.Cookie(name)
		if err != nil {
			continue
		}
		parts := strings.Split(c.Value, ".")
		if len(parts) != 3 {
			continue
		}
		payload := parts[0] + "." + parts[1]
		if !hmac.Equal([]byte(parts[2]), []byte(t.deviceMAC(email, payload))) {
			continue
		}
		exp, err := strconv.ParseInt(parts[1], 10, 64)
		if err != nil || now.Unix() >= exp {
			continue
		}
		return parts[0], true
	}
	return "", false
}

// deviceMAC binds a device cookie to the account it logged in to, under a key of its own
// derived from the token secret.
func (t *Tokens) deviceMAC(email, payload string) string {
	m := hmac.New(sha256.New, t.secret)
	m.Write([]byte("device-cookie\x00" + email + "\x00" + payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
