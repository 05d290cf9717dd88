package ingestreceiver

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/sourceverify"
)

const slackSecret = "8f742231b10e8888abcd99yyyzzz85a5"

// slackHeaders signs body as Slack documents it (api.slack.com/authentication/verifying-requests-from-slack):
// v0=hex(HMAC-SHA256(signing secret, "v0:" + timestamp + ":" + body)).
func slackHeaders(secret, body string, at time.Time) map[string]string {
	ts := strconv.FormatInt(at.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("v0:" + ts + ":" + body))
	return map[string]string{"Content-Type": "application/json", "X-Slack-Request-Timestamp": ts, "X-Slack-Signature": "v0=" + hex.EncodeToString(m.Sum(nil))}
}

// Stripe and the other senders that issue their own secret show it only once they have
// the source's URL, so the source exists first without one: until it is set, every
// request is refused, however it is signed, saying how to set it, and nothing is stored.
func TestPushSecretNotSetYet(t *testing.T) {
	unset := sourceverify.Config{Scheme: sourceverify.SchemeStripe}
	tr := startTestReceiver(t, nil, &fakeAuth{sources: map[string]mirror.Source{
		"in_stripe": {ID: "src_stripe", ProjectID: "p1", Name: "stripe", Connector: "webhook", Preset: "stripe", Verification: &unset},
	}})
	body := []byte(`{"id":"evt_1","object":"event","type":"invoice.paid","created":1714564800,"data":{"object":{"id":"in_1"}}}`)
	for name, secret := range map[string]string{"signed with some secret": "whsec_" + "0123456789abcdef0123", "signed with nothing": ""} {
		h := map[string]string{"Content-Type": "application/json"}
		if secret != "" {
			signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret})
			h["Stripe-Signature"] = signed.Header
		}
		a := do(t, http.MethodPost, tr.url+"/ingest/in_stripe", body, h)
		require.Equal(t, http.StatusUnauthorized, a.status, "%s: %s", name, a.body)
		assert.Equal(t, apierror.SignatureInvalid, a.code(t), name)
		assert.Equal(t, "signature_invalid", apierror.SignatureInvalid, "the contract's code")
		assert.JSONEq(t, `{"error":{"code":"signature_invalid","message":"this source's signing secret has not been set yet: its owner must paste Stripe's signing secret in the dashboard (Push sources, the source's panel) or POST it to the source's rotate-secret as {\"secret\": \"...\"}; nothing was stored"}}`, string(a.body), name)
	}
	assert.Empty(t, tr.consumed(), "nothing stored")
}

// Slack proves an Event Subscriptions Request URL with a signed url_verification request
// and takes the URL only if the answer is 200 with the challenge: the receiver answers it
// after the signature passes, and stores nothing; a forged one is refused like any other.
func TestPushSlackURLVerification(t *testing.T) {
	sl := sourceverify.Config{Scheme: sourceverify.SchemeSlack, Secret: slackSecret}
	tr := startTestReceiver(t, nil, &fakeAuth{sources: map[string]mirror.Source{
		"in_slack": {ID: "src_slack", ProjectID: "p1", Name: "slack", Connector: "webhook", Verification: &sl},
		"in_plain": {ID: "src_plain", ProjectID: "p1", Name: "plain", Connector: "webhook"},
	}})
	challenge := `{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`

	a := do(t, http.MethodPost, tr.url+"/ingest/in_slack", []byte(challenge), slackHeaders(slackSecret, challenge, time.Now()))
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	assert.Equal(t, "application/json", a.header.Get("Content-Type"))
	assert.JSONEq(t, `{"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}`, string(a.body))
	assert.Empty(t, tr.consumed(), "the challenge is not an event")

	forged := do(t, http.MethodPost, tr.url+"/ingest/in_slack", []byte(challenge), slackHeaders("another-secret-0123456789", challenge, time.Now()))
	assert.Equal(t, http.StatusUnauthorized, forged.status, "%s", forged.body)
	assert.Equal(t, apierror.SignatureInvalid, forged.code(t))
	assert.NotContains(t, string(forged.body), "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", "a forged challenge is not echoed")

	// Events after it are stored as any other.
	ev := `{"type":"event_callback","event_id":"Ev1","event":{"type":"app_mention","text":"hi"}}`
	a = do(t, http.MethodPost, tr.url+"/ingest/in_slack", []byte(ev), slackHeaders(slackSecret, ev, time.Now()))
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	require.Len(t, tr.consumed(), 1)
	assert.Equal(t, []string{"src:src_slack:slack:Ev1"}, tr.consumed()[0].info.RecordIDs,
		"Slack's retry of the event (same event_id) is stored once")

	// Only a slack source answers it: elsewhere the same body is just an object to store.
	a = do(t, http.MethodPost, tr.url+"/ingest/in_plain", []byte(challenge), nil)
	assert.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	assert.Len(t, tr.consumed(), 2)
}
