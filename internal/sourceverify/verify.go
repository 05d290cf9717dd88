package sourceverify

import (
	"crypto/hmac"
	"crypto/sha1" // the hmac scheme offers HMAC-SHA1 for senders that sign no other way; HMAC-SHA1 is not broken
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/otelcol-svc/otelcol-svc/internal/webhooksig"
)

// Tolerance is how far a signed timestamp may be from the receiver's clock, either way:
// the five minutes Stripe, Slack and Standard Webhooks all recommend against replays.
const Tolerance = 300 * time.Second

// Bounds on what a request's headers may make Verify do: a header with thousands of
// entries is refused before any of them costs an HMAC or a decode.
const (
	maxHeaderLen  = 4096
	maxSignatures = 16
)

// Reason tells the kinds of failure apart, for the receiver's status code and metrics.
type Reason string

const (
	// ReasonConfig: the source's own verification config is unusable (Validate fails);
	// the sender can do nothing about it, the source's owner must.
	ReasonConfig Reason = "config"
	// ReasonMissing: a header (or the URL token) the scheme needs is absent.
	ReasonMissing Reason = "missing"
	// ReasonMalformed: it is there but cannot be parsed.
	ReasonMalformed Reason = "malformed"
	// ReasonStale: the signed timestamp is outside Tolerance.
	ReasonStale Reason = "stale"
	// ReasonMismatch: well-formed, but no signature (or credential) matches.
	ReasonMismatch Reason = "mismatch"
	// ReasonNotSet: the source's signing secret, which the sender issues, has not been
	// set yet; the source's owner must paste it.
	ReasonNotSet Reason = "not_set"
)

// Error is why Verify refused a request. Its message is meant for the sender's owner, as
// the receiver's response body: it names the header and what to fix, and never holds a
// secret or the expected signature.
type Error struct {
	Scheme string
	Reason Reason
	msg    string
	// cause is, for ReasonConfig, what Validate said: for the receiver's log, not for the
	// sender, who must not learn how the source is set up.
	cause error
}

func (e *Error) Error() string { return e.msg }

// Unwrap returns what Validate said of a ReasonConfig failure, nil for the others.
func (e *Error) Unwrap() error { return e.cause }

func fail(c Config, r Reason, format string, args ...any) *Error {
	return &Error{Scheme: c.Scheme, Reason: r, msg: fmt.Sprintf(format, args...)}
}

// Verify checks one request to a push source against the source's verification config
// (as Stored returned it, or as written): h are the request's headers, urlToken the token
// the receiver took from the ingest URL's path ("" when it had none), body the raw bytes
// received, now the receiver's clock. It returns nil or an *Error.
func Verify(c Config, h http.Header, urlToken string, body []byte, now time.Time) error {
	if err := c.Validate(); err != nil {
		e := fail(c, ReasonConfig, "this source's verification settings are not valid: its owner must fix them")
		e.cause = err
		return e
	}
	if c.SecretNotSet() {
		return fail(c, ReasonNotSet, "this source's signing secret has not been set yet: its owner must paste %s signing secret in the dashboard (Push sources, the source's panel) or POST it to the source's rotate-secret as {\"secret\": \"...\"}", issuerNames[c.Scheme])
	}
	var err *Error
	switch c.Scheme {
	case SchemeGitHub:
		err = verifyGitHub(c, h, body)
	case SchemeStripe:
		err = verifyStripe(c, h, body, now)
	case SchemeStandardWebhooks:
		err = verifyStandardWebhooks(c, h, body, now)
	case SchemeSentry:
		err = verifySentry(c, h, body)
	case SchemePagerDuty:
		err = verifyPagerDuty(c, h, body)
	case SchemeSlack:
		err = verifySlack(c, h, body, now)
	case SchemeHMAC:
		err = verifyHMAC(c, h, body)
	case SchemeBasic:
		err = verifyBasic(c, h)
	case SchemeURLToken:
		err = verifyURLToken(c, urlToken)
	}
	if err != nil {
		return err
	}
	return nil
}

// issuerNames are the senders that issue their own signing secret, as their owners know them.
var issuerNames = map[string]string{
	SchemeStripe: "Stripe's", SchemeSentry: "Sentry's", SchemePagerDuty: "PagerDuty's", SchemeSlack: "Slack's",
}

func mac(newHash func() hash.Hash, key string, parts ...[]byte) []byte {
	m := hmac.New(newHash, []byte(key))
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// anyEqual compares want with every candidate, all of them, in constant time each.
func anyEqual(want []byte, candidates [][]byte) bool {
	ok := false
	for _, c := range candidates {
		if hmac.Equal(want, c) {
			ok = true
		}
	}
	return ok
}

// readHeader returns a header the scheme needs, refusing a missing or oversized one.
func readHeader(c Config, h http.Header, name, hint string) (string, *Error) {
	v := header(h, name)
	if v == "" {
		return "", fail(c, ReasonMissing, "missing %s header: %s", name, hint)
	}
	if len(v) > maxHeaderLen {
		return "", fail(c, ReasonMalformed, "%s header is %d bytes long; at most %d are accepted", name, len(v), maxHeaderLen)
	}
	return v, nil
}

// decodeHexSig decodes one hex signature of size bytes, or says what is wrong with it.
func decodeHexSig(c Config, name, v string, size int) ([]byte, *Error) {
	b, err := hex.DecodeString(v)
	if err != nil || len(b) != size {
		return nil, fail(c, ReasonMalformed, "%s header does not hold a %d-character hex signature", name, 2*size)
	}
	return b, nil
}

func mismatch(c Config, name, secretFrom string) *Error {
	return fail(c, ReasonMismatch, "%s does not match the body: is the secret the one %s? (a proxy that re-encodes the body also breaks the signature)", name, secretFrom)
}

// checkAge refuses a timestamp outside Tolerance of now; what names it in messages.
func checkAge(c Config, what, ts string, now time.Time) *Error {
	// Digits only and a sane length: ParseInt alone would also take "+1" and "-1".
	if ts == "" || len(ts) > 12 || strings.Trim(ts, "0123456789") != "" {
		return fail(c, ReasonMalformed, "%s %q is not unix seconds", what, truncate(ts))
	}
	sec, _ := strconv.ParseInt(ts, 10, 64)
	age := now.Unix() - sec
	tol := int64(Tolerance / time.Second)
	switch {
	case age > tol:
		return fail(c, ReasonStale, "%s is %d s old, outside the %d s tolerance: a replayed or long-delayed call", what, age, tol)
	case -age > tol:
		return fail(c, ReasonStale, "%s is %d s in the future, outside the %d s tolerance: is the sender's clock right?", what, -age, tol)
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// GitHub sends "X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, body)>" once the
// webhook has a secret (docs.github.com/webhooks/using-webhooks/validating-webhook-deliveries).
// The SHA-1 X-Hub-Signature it also sends is legacy and not accepted.
const headerGitHub = "X-Hub-Signature-256"

func verifyGitHub(c Config, h http.Header, body []byte) *Error {
	v, err := readHeader(c, h, headerGitHub, "set the webhook's secret in GitHub (the webhook's settings, Secret) to this source's secret")
	if err != nil {
		return err
	}
	hexSig, ok := strings.CutPrefix(v, "sha256=")
	if !ok {
		return fail(c, ReasonMalformed, "%s header does not start with sha256=", headerGitHub)
	}
	got, err := decodeHexSig(c, headerGitHub, hexSig, sha256.Size)
	if err != nil {
		return err
	}
	if !hmac.Equal(mac(sha256.New, c.Secret, body), got) {
		return mismatch(c, headerGitHub, "set in GitHub's webhook settings")
	}
	return nil
}

// Stripe sends "Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...][,v0=...]", each v1 an
// HMAC-SHA256 with the endpoint's signing secret (the whole whsec_... string as the key)
// of "<t>.<body>"; more than one v1 while a rolled secret is still valid
// (docs.stripe.com/webhooks#verify-manually). Other schemes (v0, test mode) are ignored.
const headerStripe = "Stripe-Signature"

func verifyStripe(c Config, h http.Header, body []byte, now time.Time) *Error {
	v, err := readHeader(c, h, headerStripe, "is this call from a Stripe webhook endpoint?")
	if err != nil {
		return err
	}
	if n := strings.Count(v, ",") + 1; n > 2*maxSignatures {
		return fail(c, ReasonMalformed, "%s header has %d elements; at most %d are accepted", headerStripe, n, 2*maxSignatures)
	}
	var ts string
	var sigs [][]byte
	for _, el := range strings.Split(v, ",") {
		k, val, _ := strings.Cut(strings.TrimSpace(el), "=")
		switch k {
		case "t":
			ts = val
		case "v1":
			// As Stripe's libraries do, an undecodable candidate is skipped, not fatal.
			if b, err := hex.DecodeString(val); err == nil && len(b) == sha256.Size {
				sigs = append(sigs, b)
			}
		}
	}
	if ts == "" {
		return fail(c, ReasonMalformed, "%s header has no t= timestamp", headerStripe)
	}
	if err := checkAge(c, headerStripe+" timestamp", ts, now); err != nil {
		return err
	}
	if len(sigs) == 0 {
		return fail(c, ReasonMalformed, "%s header has no v1= signature", headerStripe)
	}
	if !anyEqual(mac(sha256.New, c.Secret, []byte(ts), []byte{'.'}, body), sigs) {
		return mismatch(c, headerStripe, "Stripe shows as this endpoint's signing secret (Developers > Webhooks)")
	}
	return nil
}

// Standard Webhooks (www.standardwebhooks.com, the spec's "Verifying webhook
// authenticity"): webhook-id, webhook-timestamp and webhook-signature, a space-separated
// list of "v1,<base64 HMAC-SHA256(key, id.timestamp.body)>". internal/webhooksig signs our
// own calls this way; its Verify is the one implementation of the scheme.
func verifyStandardWebhooks(c Config, h http.Header, body []byte, now time.Time) *Error {
	sig := header(h, webhooksig.HeaderSignature)
	if len(sig) > maxHeaderLen {
		return fail(c, ReasonMalformed, "%s header is %d bytes long; at most %d are accepted", webhooksig.HeaderSignature, len(sig), maxHeaderLen)
	}
	err := webhooksig.Verify(c.Secret, h, body, now, Tolerance)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, webhooksig.ErrMissingHeader):
		missing := strings.TrimPrefix(err.Error(), webhooksig.ErrMissingHeader.Error()+": ")
		noun := "header"
		if strings.Contains(missing, ", ") {
			noun = "headers"
		}
		return fail(c, ReasonMissing, "missing %s %s: does the sender sign its calls the Standard Webhooks way, with this source's secret?", missing, noun)
	case errors.Is(err, webhooksig.ErrTimestampTooOld), errors.Is(err, webhooksig.ErrTimestampTooNew):
		if e := checkAge(c, webhooksig.HeaderTimestamp, header(h, webhooksig.HeaderTimestamp), now); e != nil {
			return e
		}
		return fail(c, ReasonStale, "%s is outside the %d s tolerance", webhooksig.HeaderTimestamp, int64(Tolerance/time.Second))
	case errors.Is(err, webhooksig.ErrInvalidTimestamp):
		return fail(c, ReasonMalformed, "%s header is not unix seconds", webhooksig.HeaderTimestamp)
	case errors.Is(err, webhooksig.ErrMalformedSigValue):
		return fail(c, ReasonMalformed, "%s header is malformed: %s", webhooksig.HeaderSignature, strings.TrimPrefix(err.Error(), webhooksig.ErrMalformedSigValue.Error()+": "))
	case errors.Is(err, webhooksig.ErrInvalidSecret):
		return fail(c, ReasonConfig, "the source's verification secret is not a Standard Webhooks secret: its owner must fix it")
	default:
		return mismatch(c, webhooksig.HeaderSignature, "shown when the source was created")
	}
}

// Sentry's integration platform sends "Sentry-Hook-Signature: <hex HMAC-SHA256(client
// secret, body)>" (docs.sentry.io/integrations/integration-platform/webhooks/).
const headerSentry = "Sentry-Hook-Signature"

func verifySentry(c Config, h http.Header, body []byte) *Error {
	v, err := readHeader(c, h, headerSentry, "is this call from a Sentry integration's webhook?")
	if err != nil {
		return err
	}
	got, err := decodeHexSig(c, headerSentry, strings.TrimSpace(v), sha256.Size)
	if err != nil {
		return err
	}
	if !hmac.Equal(mac(sha256.New, c.Secret, body), got) {
		return mismatch(c, headerSentry, "Sentry shows as the integration's client secret")
	}
	return nil
}

// PagerDuty's v3 webhooks send "X-PagerDuty-Signature: v1=<hex>[,v1=<hex>...]", each an
// HMAC-SHA256 of the body with one of the subscription's secrets, several while a secret
// is rotated (PagerDuty's developer docs, Webhooks, "Verifying Signatures").
const headerPagerDuty = "X-PagerDuty-Signature"

func verifyPagerDuty(c Config, h http.Header, body []byte) *Error {
	v, err := readHeader(c, h, headerPagerDuty, "is this call from a PagerDuty v3 webhook subscription?")
	if err != nil {
		return err
	}
	if n := strings.Count(v, ",") + 1; n > maxSignatures {
		return fail(c, ReasonMalformed, "%s header has %d signatures; at most %d are accepted", headerPagerDuty, n, maxSignatures)
	}
	var sigs [][]byte
	for _, el := range strings.Split(v, ",") {
		if hexSig, ok := strings.CutPrefix(strings.TrimSpace(el), "v1="); ok {
			if b, err := hex.DecodeString(hexSig); err == nil && len(b) == sha256.Size {
				sigs = append(sigs, b)
			}
		}
	}
	if len(sigs) == 0 {
		return fail(c, ReasonMalformed, "%s header has no v1= signature", headerPagerDuty)
	}
	if !anyEqual(mac(sha256.New, c.Secret, body), sigs) {
		return mismatch(c, headerPagerDuty, "PagerDuty showed when the webhook subscription was created")
	}
	return nil
}

// Slack sends "X-Slack-Signature: v0=<hex HMAC-SHA256(signing secret, "v0:<ts>:<body>")>"
// and the ts in X-Slack-Request-Timestamp, and asks for a five-minute window
// (api.slack.com/authentication/verifying-requests-from-slack).
const (
	headerSlack   = "X-Slack-Signature"
	headerSlackTS = "X-Slack-Request-Timestamp"
)

func verifySlack(c Config, h http.Header, body []byte, now time.Time) *Error {
	const hint = "is this call from a Slack app's request URL?"
	v, err := readHeader(c, h, headerSlack, hint)
	if err != nil {
		return err
	}
	ts, err := readHeader(c, h, headerSlackTS, hint)
	if err != nil {
		return err
	}
	if err := checkAge(c, headerSlackTS, ts, now); err != nil {
		return err
	}
	hexSig, ok := strings.CutPrefix(v, "v0=")
	if !ok {
		return fail(c, ReasonMalformed, "%s header does not start with v0=", headerSlack)
	}
	got, err := decodeHexSig(c, headerSlack, hexSig, sha256.Size)
	if err != nil {
		return err
	}
	if !hmac.Equal(mac(sha256.New, c.Secret, []byte("v0:"+ts+":"), body), got) {
		return mismatch(c, headerSlack, "Slack shows as the app's signing secret")
	}
	return nil
}

var hashes = map[string]struct {
	new  func() hash.Hash
	size int
}{
	"sha1":   {sha1.New, sha1.Size},
	"sha256": {sha256.New, sha256.Size},
	"sha512": {sha512.New, sha512.Size},
}

// The hmac scheme covers the senders that sign the raw body with a shared secret in a
// header of their own: configurable header, algorithm, encoding and prefix.
func verifyHMAC(c Config, h http.Header, body []byte) *Error {
	v, err := readHeader(c, h, c.Header, "set the sender to sign its calls with this source's secret")
	if err != nil {
		return err
	}
	v = strings.TrimSpace(v)
	if c.Prefix != "" {
		if len(v) < len(c.Prefix) || !strings.EqualFold(v[:len(c.Prefix)], c.Prefix) {
			return fail(c, ReasonMalformed, "%s header does not start with %s", c.Header, c.Prefix)
		}
		v = v[len(c.Prefix):]
	}
	alg := hashes[c.algorithm()]
	var got []byte
	if c.encoding() == "hex" {
		var e *Error
		if got, e = decodeHexSig(c, c.Header, v, alg.size); e != nil {
			return e
		}
	} else {
		got = decodeBase64(v)
		if len(got) != alg.size {
			return fail(c, ReasonMalformed, "%s header does not hold a base64 %s signature", c.Header, c.algorithm())
		}
	}
	if !hmac.Equal(mac(alg.new, c.Secret, body), got) {
		return mismatch(c, c.Header, "shown when the source was created")
	}
	return nil
}

// decodeBase64 takes the standard and the URL-safe alphabet, padded or not: senders use
// all four.
func decodeBase64(v string) []byte {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(v); err == nil {
			return b
		}
	}
	return nil
}

// HTTP Basic (RFC 7617), as Alertmanager's http_config.basic_auth and Grafana's webhook
// contact point send it.
func verifyBasic(c Config, h http.Header) *Error {
	v, err := readHeader(c, h, "Authorization", "set HTTP basic auth on the sender with this source's username and password (Alertmanager: http_config.basic_auth; Grafana: the contact point's Username and Password)")
	if err != nil {
		return err
	}
	const prefix = "Basic "
	if len(v) < len(prefix) || !strings.EqualFold(v[:len(prefix)], prefix) {
		return fail(c, ReasonMalformed, "Authorization header is not HTTP Basic: this source takes a username and password, not a token")
	}
	raw, decErr := base64.StdEncoding.DecodeString(strings.TrimSpace(v[len(prefix):]))
	if decErr != nil {
		return fail(c, ReasonMalformed, "Authorization header's Basic credentials are not base64")
	}
	user, pass, ok := strings.Cut(string(raw), ":")
	if !ok {
		return fail(c, ReasonMalformed, "Authorization header's Basic credentials have no colon between username and password")
	}
	// Both are compared, whatever the first gives, so the time taken tells nothing.
	userOK := matchesSecret(c.Username, user)
	passOK := matchesSecret(c.Password, pass)
	if !userOK || !passOK {
		return fail(c, ReasonMismatch, "username or password does not match: are they the ones shown when the source was created?")
	}
	return nil
}

// The url_token scheme is for senders that can set nothing but a URL: the receiver passes
// the token it found in the ingest URL's path.
func verifyURLToken(c Config, token string) *Error {
	if token == "" {
		return fail(c, ReasonMissing, "the ingest URL has no token: use the whole URL shown when the source was created")
	}
	if len(token) > maxFieldLen || !matchesSecret(c.Secret, token) {
		return fail(c, ReasonMismatch, "the ingest URL's token does not match: use the whole URL shown when the source was created")
	}
	return nil
}
