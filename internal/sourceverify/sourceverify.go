// Package sourceverify checks that a call to a push source's ingest URL comes from the
// sender its owner set up, for senders that cannot send our bearer token: GitHub, Stripe
// and the like sign the body with a shared secret instead, Alertmanager and Grafana send
// HTTP Basic, and the simplest senders can only be given a URL with a secret in it.
//
// A source's "verification" object is a Config. The control plane checks it with
// Validate, keeps and publishes Stored() (no password or URL token in the clear), and the
// receiver calls Verify on every request with the raw body, before it parses anything.
package sourceverify

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"

	"github.com/otelcol-svc/otelcol-svc/internal/webhooksig"
)

// Schemes, as the "scheme" field spells them.
const (
	SchemeGitHub           = "github"
	SchemeStripe           = "stripe"
	SchemeStandardWebhooks = "standard_webhooks"
	SchemeSentry           = "sentry"
	SchemePagerDuty        = "pagerduty"
	SchemeSlack            = "slack"
	SchemeHMAC             = "hmac"
	SchemeBasic            = "basic"
	SchemeURLToken         = "url_token"
)

// Schemes lists every scheme, in the order a form would offer them.
var Schemes = []string{SchemeGitHub, SchemeStripe, SchemeStandardWebhooks, SchemeSentry,
	SchemePagerDuty, SchemeSlack, SchemeHMAC, SchemeBasic, SchemeURLToken}

// Config is a push source's "verification" object. Each scheme reads only the fields it
// needs; Validate refuses the others, so that a field set for another scheme (a username
// on a github source) is noticed rather than silently ignored.
type Config struct {
	Scheme    string `json:"scheme"`
	Secret    string `json:"secret,omitempty"`
	Username  string `json:"username,omitempty"`
	Password  string `json:"password,omitempty"`
	Header    string `json:"header,omitempty"`
	Algorithm string `json:"algorithm,omitempty"`
	Encoding  string `json:"encoding,omitempty"`
	Prefix    string `json:"prefix,omitempty"`
}

// Limits on what a config may hold.
const (
	// minSecretLen is the shortest secret, password or token we accept: 16 characters of
	// a random string are beyond guessing, shorter ones are not worth the risk.
	minSecretLen = 16
	// maxFieldLen bounds every field, so a config cannot carry megabytes to every receiver.
	maxFieldLen = 512
)

// Validate reports the first thing wrong with c for its scheme, naming the field, in words
// the control plane can show to the source's owner as they are.
func (c Config) Validate() error {
	for _, f := range c.fields() {
		if len(f.value) > maxFieldLen {
			return fmt.Errorf("verification.%s is %d characters long; at most %d are allowed", f.name, len(f.value), maxFieldLen)
		}
	}
	used, ok := schemeFields[c.Scheme]
	if !ok {
		if c.Scheme == "" {
			return fmt.Errorf("verification.scheme is missing: one of %s", strings.Join(Schemes, ", "))
		}
		return fmt.Errorf("verification.scheme %q is not known: one of %s", c.Scheme, strings.Join(Schemes, ", "))
	}
	for _, f := range c.fields() {
		if f.value != "" && !strings.Contains(used, " "+f.name+" ") {
			return fmt.Errorf("verification.%s is not used by the %s scheme: remove it (the %s scheme reads:%s)", f.name, c.Scheme, c.Scheme, strings.TrimSuffix(used, " "))
		}
	}
	if c.secretNotSet() {
		// The sender issues this secret only once it has the source's URL, so the source
		// exists before it; Verify refuses every request until it is set.
		return nil
	}
	switch c.Scheme {
	case SchemeStripe:
		// Stripe shows every endpoint's signing secret as whsec_...; anything else is
		// most likely the API key pasted in the wrong place.
		if err := c.requireSecret("the endpoint's signing secret from the Stripe dashboard (Developers > Webhooks)"); err != nil {
			return err
		}
		if !strings.HasPrefix(c.Secret, "whsec_") {
			return fmt.Errorf("verification.secret must be the endpoint's signing secret, which starts with whsec_ (not an API key sk_... or pk_...)")
		}
	case SchemeStandardWebhooks:
		if c.Secret == "" {
			return fmt.Errorf("verification.secret is missing: the sender's signing secret, whsec_ followed by base64")
		}
		if err := webhooksig.ValidateSecret(c.Secret); err != nil {
			return fmt.Errorf("verification.secret: %v", err)
		}
		if k, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(c.Secret, webhooksig.SecretPrefix)); len(k) < minSecretLen {
			return fmt.Errorf("verification.secret's key is %d bytes; at least %d are needed", len(k), minSecretLen)
		}
	case SchemeGitHub:
		return c.requireSecret("the webhook's secret, the same string as in GitHub's webhook settings")
	case SchemeSentry:
		return c.requireSecret("the integration's client secret from Sentry (Settings > Developer Settings)")
	case SchemePagerDuty:
		return c.requireSecret("the webhook subscription's signing secret from PagerDuty")
	case SchemeSlack:
		return c.requireSecret("the app's signing secret from Slack (Basic Information > App Credentials)")
	case SchemeHMAC:
		if err := c.requireSecret("the shared secret the sender signs with"); err != nil {
			return err
		}
		if c.Header == "" {
			return fmt.Errorf("verification.header is missing: the name of the header that carries the signature")
		}
		if !validHeaderName(c.Header) {
			return fmt.Errorf("verification.header %q is not a valid HTTP header name", c.Header)
		}
		if _, ok := hashes[c.algorithm()]; !ok {
			return fmt.Errorf("verification.algorithm %q is not supported: sha1, sha256 or sha512", c.Algorithm)
		}
		if e := c.encoding(); e != "hex" && e != "base64" {
			return fmt.Errorf("verification.encoding %q is not supported: hex or base64", c.Encoding)
		}
		if strings.ContainsAny(c.Prefix, "\r\n") {
			return fmt.Errorf("verification.prefix must not contain a line break")
		}
	case SchemeBasic:
		if c.Username == "" {
			return fmt.Errorf("verification.username is missing: the user name the sender sends with HTTP Basic")
		}
		if strings.ContainsAny(c.Username, ":\r\n") {
			return fmt.Errorf("verification.username must not contain a colon or a line break (HTTP Basic cannot carry them)")
		}
		return checkSecretOrHash("password", c.Password)
	case SchemeURLToken:
		if err := checkSecretOrHash("secret", c.Secret); err != nil {
			return err
		}
		if !isStoredHash(c.Secret) && strings.Trim(c.Secret, urlTokenAlphabet) != "" {
			return fmt.Errorf("verification.secret must use only letters, digits, - and _, as it goes into a URL path")
		}
	}
	return nil
}

// schemeFields lists the fields each scheme reads, space-delimited for Contains.
var schemeFields = map[string]string{
	SchemeGitHub:           " secret ",
	SchemeStripe:           " secret ",
	SchemeStandardWebhooks: " secret ",
	SchemeSentry:           " secret ",
	SchemePagerDuty:        " secret ",
	SchemeSlack:            " secret ",
	SchemeHMAC:             " secret header algorithm encoding prefix ",
	SchemeBasic:            " username password ",
	SchemeURLToken:         " secret ",
}

type field struct{ name, value string }

func (c Config) fields() []field {
	return []field{{"secret", c.Secret}, {"username", c.Username}, {"password", c.Password},
		{"header", c.Header}, {"algorithm", c.Algorithm}, {"encoding", c.Encoding}, {"prefix", c.Prefix}}
}

// SecretNotSet reports whether c is of a scheme whose secret the sender issues (stripe,
// sentry, pagerduty, slack) and that secret has not been given yet: a valid config whose
// every request Verify refuses with ReasonNotSet.
func (c Config) SecretNotSet() bool { return c.secretNotSet() }

func (c Config) secretNotSet() bool {
	switch c.Scheme {
	case SchemeStripe, SchemeSentry, SchemePagerDuty, SchemeSlack:
		return c.Secret == ""
	}
	return false
}

func (c Config) requireSecret(what string) error {
	if c.Secret == "" {
		return fmt.Errorf("verification.secret is missing: %s", what)
	}
	if len(c.Secret) < minSecretLen {
		return fmt.Errorf("verification.secret is %d characters long; at least %d are needed", len(c.Secret), minSecretLen)
	}
	if strings.ContainsAny(c.Secret, "\r\n") {
		return fmt.Errorf("verification.secret must not contain a line break (was it pasted with one?)")
	}
	if strings.TrimSpace(c.Secret) != c.Secret {
		// The sender signs with exactly what its settings hold; a space picked up by
		// copy and paste would make every signature fail to match.
		return fmt.Errorf("verification.secret begins or ends with a space (was it pasted with one?)")
	}
	return nil
}

func checkSecretOrHash(name, v string) error {
	switch {
	case v == "":
		return fmt.Errorf("verification.%s is missing", name)
	case isStoredHash(v):
		if _, _, ok := parseStoredHash(v); !ok {
			return fmt.Errorf("verification.%s starts with %q but is not a stored hash", name, storedHashPrefix)
		}
	case len(v) < minSecretLen:
		return fmt.Errorf("verification.%s is %d characters long; at least %d are needed", name, len(v), minSecretLen)
	case strings.ContainsAny(v, "\r\n"):
		return fmt.Errorf("verification.%s must not contain a line break", name)
	}
	return nil
}

func (c Config) algorithm() string {
	if c.Algorithm == "" {
		return "sha256"
	}
	return c.Algorithm
}

func (c Config) encoding() string {
	if c.Encoding == "" {
		return "hex"
	}
	return c.Encoding
}

const urlTokenAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return true
}

// Stored returns what may be kept in the control plane's store and published to the data
// plane: the basic scheme's password and the url_token scheme's token are replaced by a
// salted hash (a fresh random salt per call), which Verify compares in constant time, so a
// leaked store or subject does not leak credentials a sender can replay. Calling Stored on
// a stored config returns it unchanged.
//
// The signing schemes' secrets stay in the clear: to check an HMAC the verifier must
// compute it again with the very key the sender used, so the data plane needs that key
// and its copy must be protected like one.
func (c Config) Stored() Config {
	switch c.Scheme {
	case SchemeBasic:
		c.Password = storeHash(c.Password)
	case SchemeURLToken:
		c.Secret = storeHash(c.Secret)
	}
	return c
}

// storedHashPrefix starts a stored hash: "hmac-sha256$<salt>$<mac>", the salt and the
// HMAC-SHA256(salt, secret) in unpadded base64url. The secrets it hashes are generated
// and long (minSecretLen and more), so a fast keyed hash is enough; a slow password hash
// would cost the receiver on every request.
const storedHashPrefix = "hmac-sha256$"

func isStoredHash(v string) bool { return strings.HasPrefix(v, storedHashPrefix) }

func storeHash(v string) string {
	if v == "" || isStoredHash(v) {
		return v
	}
	salt := make([]byte, 16)
	randRead(salt)
	return storedHashPrefix + base64.RawURLEncoding.EncodeToString(salt) + "$" +
		base64.RawURLEncoding.EncodeToString(saltedMAC(salt, v))
}

func saltedMAC(salt []byte, v string) []byte {
	m := hmac.New(sha256.New, salt)
	m.Write([]byte(v))
	return m.Sum(nil)
}

func parseStoredHash(v string) (salt, sum []byte, ok bool) {
	s, m, found := strings.Cut(strings.TrimPrefix(v, storedHashPrefix), "$")
	if !found {
		return nil, nil, false
	}
	salt, err1 := base64.RawURLEncoding.DecodeString(s)
	sum, err2 := base64.RawURLEncoding.DecodeString(m)
	if err1 != nil || err2 != nil || len(salt) < 8 || len(sum) != sha256.Size {
		return nil, nil, false
	}
	return salt, sum, true
}

// matchesSecret reports, in time independent of where they differ, whether got is the
// secret that want holds (in the clear, or as a stored hash).
func matchesSecret(want, got string) bool {
	if isStoredHash(want) {
		salt, sum, ok := parseStoredHash(want)
		if !ok {
			return false
		}
		return hmac.Equal(saltedMAC(salt, got), sum)
	}
	// Hashing both sides first keeps the comparison's time independent of the lengths.
	w, g := sha256.Sum256([]byte(want)), sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(w[:], g[:]) == 1
}

// NewSecret returns a new random secret for the schemes where we, not the sender, make it:
// a url_token token or a basic password (43 URL-safe characters), a standard_webhooks
// signing secret (whsec_ and 32 bytes of base64), an hmac or github secret (64 hex
// characters, which every sender's settings page accepts). For the schemes whose secret
// the sender issues (stripe, sentry, pagerduty, slack) it returns "".
func NewSecret(scheme string) string {
	b := make([]byte, 32)
	switch scheme {
	case SchemeURLToken, SchemeBasic:
		randRead(b)
		return base64.RawURLEncoding.EncodeToString(b)
	case SchemeStandardWebhooks:
		return webhooksig.NewSecret()
	case SchemeHMAC, SchemeGitHub:
		randRead(b)
		return hex.EncodeToString(b)
	}
	return ""
}

func randRead(b []byte) {
	if _, err := rand.Read(b); err != nil {
		// crypto/rand does not fail on supported platforms; a predictable secret must
		// never be handed out.
		panic("sourceverify: crypto/rand: " + err.Error())
	}
}

// header reads a header by its canonical or its literal key: a header map built by hand,
// or by a framework that keeps HTTP/2's lowercase names, may not be canonical.
func header(h http.Header, name string) string {
	if v := h.Get(name); v != "" {
		return v
	}
	if vs := h[strings.ToLower(name)]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}
