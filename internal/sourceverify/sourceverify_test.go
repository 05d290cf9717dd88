package sourceverify

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/otelcol-svc/otelcol-svc/internal/webhooksig"
)

func requireReason(t *testing.T, want Reason, err error) {
	t.Helper()
	require.Error(t, err)
	var e *Error
	require.True(t, errors.As(err, &e), "%T is not *Error: %v", err, err)
	require.Equal(t, want, e.Reason, "%v", err)
}

func flipByte(b []byte) []byte {
	c := append([]byte(nil), b...)
	c[len(c)/2] ^= 0x01
	return c
}

func hexMAC(key string, parts ...string) string {
	m := hmac.New(sha256.New, []byte(key))
	for _, p := range parts {
		m.Write([]byte(p))
	}
	return hex.EncodeToString(m.Sum(nil))
}

// GitHub's and Slack's documentation each publish one worked example; both must pass.
func TestProvidersDocumentedExamples(t *testing.T) {
	// docs.github.com/webhooks/using-webhooks/validating-webhook-deliveries, "Testing the
	// webhook payload validation". The secret is shorter than Validate allows for new
	// sources, so the example goes through the verifier directly.
	gh := Config{Scheme: SchemeGitHub, Secret: "It's a Secret to Everybody"}
	h := http.Header{"X-Hub-Signature-256": {"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"}}
	require.Nil(t, verifyGitHub(gh, h, []byte("Hello, World!")))
	require.NotNil(t, verifyGitHub(gh, h, []byte("Hello, World?")))

	// api.slack.com/authentication/verifying-requests-from-slack.
	slack := Config{Scheme: SchemeSlack, Secret: "8f742231b10e8888abcd99yyyzzz85a5"}
	body := []byte("token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c")
	sh := http.Header{"X-Slack-Signature": {"v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"},
		"X-Slack-Request-Timestamp": {"1531420618"}}
	at := time.Unix(1531420618, 0).Add(time.Minute)
	require.NoError(t, Verify(slack, sh, "", body, at))
	requireReason(t, ReasonMismatch, Verify(slack, sh, "", flipByte(body), at))
	err := Verify(slack, sh, "", body, time.Unix(1531420618+412, 0))
	requireReason(t, ReasonStale, err)
	require.Contains(t, err.Error(), "412 s old, outside the 300 s tolerance")
}

func TestMissingHeadersSayWhatToSet(t *testing.T) {
	err := Verify(Config{Scheme: SchemeGitHub, Secret: NewSecret(SchemeGitHub)}, http.Header{}, "", []byte("{}"), time.Now())
	requireReason(t, ReasonMissing, err)
	require.Equal(t, "missing X-Hub-Signature-256 header: set the webhook's secret in GitHub (the webhook's settings, Secret) to this source's secret", err.Error())

	err = Verify(Config{Scheme: SchemeStandardWebhooks, Secret: NewSecret(SchemeStandardWebhooks)},
		http.Header{"Webhook-Id": {"msg_1"}}, "", []byte("{}"), time.Now())
	requireReason(t, ReasonMissing, err)
	require.Contains(t, err.Error(), "missing webhook-timestamp, webhook-signature headers: does the sender sign its calls the Standard Webhooks way")

	for _, scheme := range []string{SchemeStripe, SchemeSentry, SchemePagerDuty, SchemeSlack} {
		err := Verify(Config{Scheme: scheme, Secret: "whsec_" + strings.Repeat("a", 32)}, http.Header{}, "", nil, time.Now())
		requireReason(t, ReasonMissing, err)
	}
}

func stripeHeader(secret string, body []byte, at time.Time) string {
	return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: at}).Header
}

func TestStripeSignedByStripeGo(t *testing.T) {
	secret := "whsec_" + NewSecret(SchemeHMAC)
	c := Config{Scheme: SchemeStripe, Secret: secret}
	require.NoError(t, c.Validate())
	body := []byte(`{"id":"evt_1","type":"payment_intent.succeeded"}`)
	now := time.Unix(1_790_000_000, 0)
	h := http.Header{"Stripe-Signature": {stripeHeader(secret, body, now)}}

	require.NoError(t, Verify(c, h, "", body, now.Add(299*time.Second)))
	requireReason(t, ReasonMismatch, Verify(c, h, "", flipByte(body), now))
	requireReason(t, ReasonMismatch, Verify(Config{Scheme: SchemeStripe, Secret: "whsec_" + NewSecret(SchemeHMAC)}, h, "", body, now))

	err := Verify(c, h, "", body, now.Add(412*time.Second))
	requireReason(t, ReasonStale, err)
	require.Equal(t, "Stripe-Signature timestamp is 412 s old, outside the 300 s tolerance: a replayed or long-delayed call", err.Error())
	err = Verify(c, h, "", body, now.Add(-412*time.Second))
	requireReason(t, ReasonStale, err)
	require.Contains(t, err.Error(), "412 s in the future")

	// Rotation: while a rolled secret is still valid Stripe sends one v1 per secret, the
	// old one first here.
	old := stripeHeader("whsec_"+NewSecret(SchemeHMAC), body, now)
	_, oldV1, _ := strings.Cut(old, ",")
	_, newV1, _ := strings.Cut(h.Get("Stripe-Signature"), ",")
	rotated := http.Header{"Stripe-Signature": {"t=" + strconv.FormatInt(now.Unix(), 10) + "," + oldV1 + "," + newV1 + ",v0=abc"}}
	require.NoError(t, Verify(c, rotated, "", body, now))
	onlyOld := http.Header{"Stripe-Signature": {old}}
	requireReason(t, ReasonMismatch, Verify(c, onlyOld, "", body, now))

	requireReason(t, ReasonMalformed, Verify(c, http.Header{"Stripe-Signature": {oldV1}}, "", body, now))
	requireReason(t, ReasonMalformed, Verify(c, http.Header{"Stripe-Signature": {"t=" + strconv.FormatInt(now.Unix(), 10) + ",v1=zz"}}, "", body, now))
}

// A header stuffed with entries is refused before it costs one HMAC per entry.
func TestHugeSignatureListsAreRefusedCheaply(t *testing.T) {
	body := []byte("{}")
	now := time.Unix(1_790_000_000, 0)
	entry := "v1=" + strings.Repeat("ab", 32)
	many := strings.Repeat(entry+",", 10_000) + entry
	cases := map[string]struct {
		c Config
		h http.Header
	}{
		"stripe":    {Config{Scheme: SchemeStripe, Secret: "whsec_" + NewSecret(SchemeHMAC)}, http.Header{"Stripe-Signature": {"t=1790000000," + many}}},
		"pagerduty": {Config{Scheme: SchemePagerDuty, Secret: NewSecret(SchemeHMAC)}, http.Header{"X-Pagerduty-Signature": {many}}},
		"standard_webhooks": {Config{Scheme: SchemeStandardWebhooks, Secret: NewSecret(SchemeStandardWebhooks)}, http.Header{
			"Webhook-Id": {"msg_1"}, "Webhook-Timestamp": {"1790000000"},
			"Webhook-Signature": {strings.Repeat("v1,"+base64.StdEncoding.EncodeToString(make([]byte, 32))+" ", 10_000)}}},
		// Within the byte limit, but still more entries than any sender sends.
		"stripe, 40 entries":    {Config{Scheme: SchemeStripe, Secret: "whsec_" + NewSecret(SchemeHMAC)}, http.Header{"Stripe-Signature": {"t=1790000000" + strings.Repeat(","+entry, 40)}}},
		"pagerduty, 20 entries": {Config{Scheme: SchemePagerDuty, Secret: NewSecret(SchemeHMAC)}, http.Header{"X-Pagerduty-Signature": {entry + strings.Repeat(","+entry, 19)}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			err := Verify(tc.c, tc.h, "", body, now)
			requireReason(t, ReasonMalformed, err)
			require.Less(t, time.Since(start), 50*time.Millisecond)
		})
	}
}

func TestStandardWebhooksSignedByOurSigner(t *testing.T) {
	c := Config{Scheme: SchemeStandardWebhooks, Secret: NewSecret(SchemeStandardWebhooks)}
	body := []byte(`{"hello":"world"}`)
	now := time.Unix(1_790_000_000, 0)
	h := http.Header{}
	require.NoError(t, webhooksig.SetHeaders(h, c.Secret, "msg_1", now, body))
	require.NoError(t, Verify(c, h, "", body, now))
	requireReason(t, ReasonMismatch, Verify(c, h, "", flipByte(body), now))
	requireReason(t, ReasonStale, Verify(c, h, "", body, now.Add(-6*time.Minute)))
	h.Set("webhook-timestamp", "soon")
	requireReason(t, ReasonMalformed, Verify(c, h, "", body, now))
}

func TestSentry(t *testing.T) {
	// Sentry publishes no signer; the signature is computed as its docs describe.
	c := Config{Scheme: SchemeSentry, Secret: NewSecret(SchemeHMAC)}
	body := []byte(`{"action":"created","data":{"issue":{"id":"1"}}}`)
	h := http.Header{"Sentry-Hook-Signature": {hexMAC(c.Secret, string(body))}}
	require.NoError(t, Verify(c, h, "", body, time.Now()))
	requireReason(t, ReasonMismatch, Verify(c, h, "", flipByte(body), time.Now()))
	requireReason(t, ReasonMalformed, Verify(c, http.Header{"Sentry-Hook-Signature": {"sha256=00"}}, "", body, time.Now()))
}

func TestPagerDutyRotation(t *testing.T) {
	// PagerDuty publishes no signer; the signatures are computed as its docs describe.
	c := Config{Scheme: SchemePagerDuty, Secret: NewSecret(SchemeHMAC)}
	body := []byte(`{"event":{"event_type":"incident.triggered"}}`)
	oldSig, newSig := "v1="+hexMAC(NewSecret(SchemeHMAC), string(body)), "v1="+hexMAC(c.Secret, string(body))
	require.NoError(t, Verify(c, http.Header{"X-Pagerduty-Signature": {newSig}}, "", body, time.Now()))
	require.NoError(t, Verify(c, http.Header{"X-Pagerduty-Signature": {oldSig + ", " + newSig}}, "", body, time.Now()))
	requireReason(t, ReasonMismatch, Verify(c, http.Header{"X-Pagerduty-Signature": {oldSig}}, "", body, time.Now()))
	requireReason(t, ReasonMismatch, Verify(c, http.Header{"X-Pagerduty-Signature": {newSig}}, "", flipByte(body), time.Now()))
}

func TestSlackSignature(t *testing.T) {
	c := Config{Scheme: SchemeSlack, Secret: strings.Repeat("5", 32)}
	body := []byte(`{"type":"event_callback"}`)
	now := time.Unix(1_790_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	h := http.Header{"X-Slack-Signature": {"v0=" + hexMAC(c.Secret, "v0:"+ts+":", string(body))}, "X-Slack-Request-Timestamp": {ts}}
	require.NoError(t, Verify(c, h, "", body, now))
	requireReason(t, ReasonMismatch, Verify(c, h, "", flipByte(body), now))
	// The timestamp is signed: moving it into the window does not help a replay.
	h2 := h.Clone()
	h2.Set("X-Slack-Request-Timestamp", strconv.FormatInt(now.Unix()+1, 10))
	requireReason(t, ReasonMismatch, Verify(c, h2, "", body, now))
	h2.Set("X-Slack-Request-Timestamp", "-1")
	requireReason(t, ReasonMalformed, Verify(c, h2, "", body, now))
}

func TestGenericHMAC(t *testing.T) {
	body := []byte(`{"alert":"disk full"}`)
	secret := NewSecret(SchemeHMAC)
	m1 := hmac.New(sha1.New, []byte(secret))
	m1.Write(body)
	sha1B64 := base64.StdEncoding.EncodeToString(m1.Sum(nil))
	cases := []struct {
		name  string
		c     Config
		value string
	}{
		{"sha256 hex, default algorithm and encoding", Config{Header: "X-Signature"}, hexMAC(secret, string(body))},
		{"sha256 hex with a prefix, upper-case hex", Config{Header: "X-Signature", Prefix: "sha256="}, "SHA256=" + strings.ToUpper(hexMAC(secret, string(body)))},
		{"sha1 base64", Config{Header: "X-Hook-Sig", Algorithm: "sha1", Encoding: "base64"}, sha1B64},
		{"sha1 unpadded base64", Config{Header: "X-Hook-Sig", Algorithm: "sha1", Encoding: "base64"}, strings.TrimRight(sha1B64, "=")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.c.Scheme, tc.c.Secret = SchemeHMAC, secret
			require.NoError(t, tc.c.Validate())
			h := http.Header{}
			h.Set(tc.c.Header, tc.value)
			require.NoError(t, Verify(tc.c, h, "", body, time.Now()))
			requireReason(t, ReasonMismatch, Verify(tc.c, h, "", flipByte(body), time.Now()))
		})
	}
	c := Config{Scheme: SchemeHMAC, Secret: secret, Header: "X-Signature", Algorithm: "sha512"}
	err := Verify(c, http.Header{"X-Signature": {hexMAC(secret, string(body))}}, "", body, time.Now())
	requireReason(t, ReasonMalformed, err)
	require.Contains(t, err.Error(), "128-character hex signature")
}

func basicAuth(user, pass string) http.Header {
	return http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))}}
}

func TestBasicWithTheStoredPassword(t *testing.T) {
	c := Config{Scheme: SchemeBasic, Username: "alertmanager", Password: NewSecret(SchemeBasic)}
	require.NoError(t, c.Validate())
	stored := c.Stored()
	require.NoError(t, stored.Validate())
	require.NotEqual(t, c.Password, stored.Password)
	js, err := json.Marshal(stored)
	require.NoError(t, err)
	require.NotContains(t, string(js), c.Password)
	require.Equal(t, stored, stored.Stored(), "Stored on a stored config changes nothing")
	require.NotEqual(t, stored.Password, c.Stored().Password, "each Stored call draws a new salt")

	// The request Alertmanager sends for basic_auth, built by net/http.
	req, _ := http.NewRequest(http.MethodPost, "http://x/ingest/k", nil)
	req.SetBasicAuth(c.Username, c.Password)
	for _, cfg := range []Config{c, stored} {
		require.NoError(t, Verify(cfg, req.Header, "", nil, time.Now()))
		requireReason(t, ReasonMismatch, Verify(cfg, basicAuth(c.Username, c.Password+"x"), "", nil, time.Now()))
		requireReason(t, ReasonMismatch, Verify(cfg, basicAuth("grafana", c.Password), "", nil, time.Now()))
		requireReason(t, ReasonMissing, Verify(cfg, http.Header{}, "", nil, time.Now()))
		requireReason(t, ReasonMalformed, Verify(cfg, http.Header{"Authorization": {"Bearer osi_abc"}}, "", nil, time.Now()))
	}
	// A stored hash in the request is not the password.
	requireReason(t, ReasonMismatch, Verify(stored, basicAuth(c.Username, stored.Password), "", nil, time.Now()))
}

func TestURLToken(t *testing.T) {
	c := Config{Scheme: SchemeURLToken, Secret: NewSecret(SchemeURLToken)}
	stored := c.Stored()
	require.NotContains(t, stored.Secret, c.Secret)
	for _, cfg := range []Config{c, stored} {
		require.NoError(t, Verify(cfg, nil, c.Secret, []byte("{}"), time.Now()))
		requireReason(t, ReasonMismatch, Verify(cfg, nil, c.Secret[1:], []byte("{}"), time.Now()))
		err := Verify(cfg, nil, "", []byte("{}"), time.Now())
		requireReason(t, ReasonMissing, err)
		require.Contains(t, err.Error(), "the ingest URL has no token")
	}
}

func TestStoredKeepsSigningSecrets(t *testing.T) {
	// The verifier recomputes the sender's HMAC, so the key itself must reach it.
	for _, c := range []Config{
		{Scheme: SchemeGitHub, Secret: NewSecret(SchemeGitHub)},
		{Scheme: SchemeStandardWebhooks, Secret: NewSecret(SchemeStandardWebhooks)},
		{Scheme: SchemeHMAC, Secret: NewSecret(SchemeHMAC), Header: "X-Sig"},
	} {
		require.Equal(t, c, c.Stored())
	}
}

func TestValidateNamesTheField(t *testing.T) {
	secret := NewSecret(SchemeHMAC)
	cases := []struct {
		c    Config
		want string
	}{
		{Config{}, "verification.scheme is missing"},
		{Config{Scheme: "gitlab", Secret: secret}, `verification.scheme "gitlab" is not known`},
		{Config{Scheme: SchemeGitHub}, "verification.secret is missing: the webhook's secret"},
		{Config{Scheme: SchemeGitHub, Secret: "short"}, "verification.secret is 5 characters long; at least 16 are needed"},
		{Config{Scheme: SchemeSentry, Secret: secret + " "}, "verification.secret begins or ends with a space"},
		{Config{Scheme: SchemeGitHub, Secret: secret, Username: "bob"}, "verification.username is not used by the github scheme"},
		{Config{Scheme: SchemeBasic, Username: "bob", Password: secret, Header: "X-Sig"}, "verification.header is not used by the basic scheme"},
		{Config{Scheme: SchemeStripe, Secret: "sk_live_" + secret}, "verification.secret must be the endpoint's signing secret, which starts with whsec_"},
		{Config{Scheme: SchemeStandardWebhooks, Secret: "whsec_not base64!"}, "verification.secret: webhook secret is not valid"},
		{Config{Scheme: SchemeStandardWebhooks, Secret: "whsec_c2hvcnQ="}, "verification.secret's key is 5 bytes; at least 16 are needed"},
		{Config{Scheme: SchemeHMAC, Secret: secret}, "verification.header is missing"},
		{Config{Scheme: SchemeHMAC, Secret: secret, Header: "X Sig"}, `verification.header "X Sig" is not a valid HTTP header name`},
		{Config{Scheme: SchemeHMAC, Secret: secret, Header: "X-Sig", Algorithm: "md5"}, `verification.algorithm "md5" is not supported`},
		{Config{Scheme: SchemeHMAC, Secret: secret, Header: "X-Sig", Encoding: "base32"}, `verification.encoding "base32" is not supported`},
		{Config{Scheme: SchemeBasic, Password: secret}, "verification.username is missing"},
		{Config{Scheme: SchemeBasic, Username: "a:b", Password: secret}, "verification.username must not contain a colon"},
		{Config{Scheme: SchemeBasic, Username: "bob", Password: "hunter2"}, "verification.password is 7 characters long"},
		{Config{Scheme: SchemeBasic, Username: "bob", Password: storedHashPrefix + "x"}, "verification.password starts with"},
		{Config{Scheme: SchemeURLToken}, "verification.secret is missing"},
		{Config{Scheme: SchemeURLToken, Secret: secret + "/.."}, "verification.secret must use only letters, digits, - and _"},
		{Config{Scheme: SchemeSlack, Secret: strings.Repeat("x", 600)}, "verification.secret is 600 characters long; at most 512 are allowed"},
	}
	for _, tc := range cases {
		err := tc.c.Validate()
		require.Error(t, err, "%+v", tc.c)
		require.Contains(t, err.Error(), tc.want)
		if tc.c.Secret != "" && len(tc.c.Secret) >= minSecretLen {
			require.NotContains(t, err.Error(), tc.c.Secret, "Validate echoes the secret")
		}
		// A config that does not validate verifies nothing, and tells the sender nothing of
		// how it is wrong; the receiver's log gets Validate's words.
		verr := Verify(tc.c, http.Header{}, "tok", nil, time.Now())
		requireReason(t, ReasonConfig, verr)
		require.Equal(t, "this source's verification settings are not valid: its owner must fix them", verr.Error())
		require.Equal(t, err.Error(), errors.Unwrap(verr).Error())
	}
}

func TestNewSecretIsValidForItsScheme(t *testing.T) {
	for _, scheme := range []string{SchemeGitHub, SchemeStandardWebhooks, SchemeHMAC, SchemeURLToken} {
		s := NewSecret(scheme)
		require.NotEqual(t, s, NewSecret(scheme))
		c := Config{Scheme: scheme, Secret: s}
		if scheme == SchemeHMAC {
			c.Header = "X-Signature"
		}
		require.NoError(t, c.Validate(), scheme)
	}
	require.NoError(t, Config{Scheme: SchemeBasic, Username: "u", Password: NewSecret(SchemeBasic)}.Validate())
	for _, scheme := range []string{SchemeStripe, SchemeSentry, SchemePagerDuty, SchemeSlack, "nope"} {
		require.Empty(t, NewSecret(scheme), "the sender issues %s secrets", scheme)
	}
}

// Stripe, Sentry, PagerDuty and Slack show their signing secret only once they have the
// source's URL, so a source of theirs exists first without one: valid to store, refusing
// every request (whatever it carries) until the secret is set.
func TestProviderIssuedSecretNotSetYet(t *testing.T) {
	for scheme, name := range map[string]string{SchemeStripe: "Stripe's", SchemeSentry: "Sentry's", SchemePagerDuty: "PagerDuty's", SchemeSlack: "Slack's"} {
		c := Config{Scheme: scheme}
		require.NoError(t, c.Validate(), scheme)
		require.True(t, c.SecretNotSet())
		require.Equal(t, c, c.Stored())
		h := http.Header{"Stripe-Signature": {"t=1,v1=00"}, "X-Slack-Signature": {"v0=00"}, "X-Slack-Request-Timestamp": {"1"}}
		err := Verify(c, h, "", []byte(`{}`), time.Now())
		requireReason(t, ReasonNotSet, err)
		require.Equal(t, "this source's signing secret has not been set yet: its owner must paste "+name+
			` signing secret in the dashboard (Push sources, the source's panel) or POST it to the source's rotate-secret as {"secret": "..."}`, err.Error())
	}
	for _, scheme := range []string{SchemeGitHub, SchemeHMAC, SchemeStandardWebhooks, SchemeURLToken} {
		require.False(t, Config{Scheme: scheme}.SecretNotSet(), scheme)
		require.Error(t, Config{Scheme: scheme}.Validate(), scheme)
	}
	// Only the secret may be missing: a field the scheme does not read is still refused.
	require.ErrorContains(t, Config{Scheme: SchemeStripe, Username: "u"}.Validate(), "verification.username is not used by the stripe scheme")
}
