package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/sourceverify"
)

// verifiedSource is a source of the given preset and verification.
func verifiedSource(name, preset string, verification map[string]any) map[string]any {
	b := map[string]any{"name": name}
	if preset != "" {
		b["preset"] = preset
	}
	if verification != nil {
		b["verification"] = verification
	}
	return b
}

// mirrored reads a source's entry as the receiver does.
func mirrored(t *testing.T, m mirrorView, ingestKey string) mirror.Source {
	t.Helper()
	var src mirror.Source
	require.True(t, get(t, m.sources, ingestKey, &src), "the source is in the mirror")
	return src
}

func basicAuth(user, pass string) http.Header {
	return http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))}}
}

// Each class of scheme: a secret we make is shown in the create answer only; the mirror
// holds what the receiver needs (a signing secret as it is, a password or URL token only
// hashed); every later read, a member's included, says only that one is set.
func TestSourceVerificationShownOnce(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		env := map[string]string{"SVC_LOG_LEVEL": "debug"}
		for k, v := range db {
			env[k] = v
		}
		s := startSourceStack(t, env)
		cp := s.cp.URL
		owner, _ := s.signup(t, "verify-owner@example.com")
		member, _ := s.signup(t, "verify-member@example.com")
		pid := call(t, cp, "POST", "/api/v1/projects", owner, map[string]string{"name": "v"}).str("id")
		require.Equal(t, http.StatusCreated, call(t, cp, "POST", "/api/v1/projects/"+pid+"/members", owner, map[string]string{"email": "verify-member@example.com"}).Status)
		base := "/api/v1/projects/" + pid + "/sources"
		m := openMirror(t, s.nats.URL())
		body := []byte(`{"action":"opened"}`)
		stripeSecret := "whsec_" + strings.Repeat("ab12", 8)

		var shown []string // every secret shown, none of which may appear again
		for _, c := range []struct {
			name, preset string
			verification map[string]any
			secretField  string // where the answer shows it
			pattern      string
			// accepts tells whether the mirror's config lets through a request made with
			// the secret shown.
			accepts func(c sourceverify.Config, secret string) error
		}{
			{"gh", "github", map[string]any{"scheme": "github"}, "secret", `^[0-9a-f]{64}$`, func(c sourceverify.Config, secret string) error {
				return sourceverify.Verify(c, http.Header{"X-Hub-Signature-256": {"sha256=" + hmacHex(secret, body)}}, "", body, time.Now())
			}},
			{"hmac", "", map[string]any{"scheme": "hmac", "header": "X-Signature", "prefix": "sha256="}, "secret", `^[0-9a-f]{64}$`, func(c sourceverify.Config, secret string) error {
				return sourceverify.Verify(c, http.Header{"X-Signature": {"sha256=" + hmacHex(secret, body)}}, "", body, time.Now())
			}},
			{"sw", "cloudevents", map[string]any{"scheme": "standard_webhooks"}, "secret", `^whsec_[A-Za-z0-9+/]+=*$`, nil},
			{"am", "alertmanager", map[string]any{"scheme": "basic", "username": "am"}, "password", `^[A-Za-z0-9_-]{43}$`, func(c sourceverify.Config, secret string) error {
				return sourceverify.Verify(c, basicAuth("am", secret), "", body, time.Now())
			}},
			{"tok", "", map[string]any{"scheme": "url_token"}, "secret", `^[A-Za-z0-9_-]{43}$`, func(c sourceverify.Config, secret string) error {
				return sourceverify.Verify(c, nil, secret, body, time.Now())
			}},
			{"stripe", "stripe", map[string]any{"scheme": "stripe", "secret": stripeSecret}, "secret", `^whsec_`, nil},
		} {
			r := call(t, cp, "POST", base, owner, verifiedSource(c.name, c.preset, c.verification))
			require.Equal(t, http.StatusCreated, r.Status, "%s: %s", c.name, r.Raw)
			ver := r.Body["verification"].(map[string]any)
			secret, _ := ver[c.secretField].(string)
			assert.Regexp(t, c.pattern, secret, "%s: the answer shows the %s once", c.name, c.secretField)
			assert.Equal(t, true, ver["secret_set"], c.name)
			assert.Equal(t, c.verification["scheme"], ver["scheme"], c.name)
			assert.Equal(t, c.preset, r.str("preset"), c.name)
			ingestKey := r.str("ingest_key")
			if c.name == "tok" {
				assert.Equal(t, testReceiverURL+"/ingest/"+ingestKey+"/"+secret, r.str("ingest_url"), "the url token is in the URL shown once")
			} else {
				assert.Equal(t, testReceiverURL+"/ingest/"+ingestKey, r.str("ingest_url"), c.name)
			}
			shown = append(shown, secret)

			src := mirrored(t, m, ingestKey)
			require.NotNil(t, src.Verification, c.name)
			assert.Equal(t, c.preset, src.Preset, c.name)
			switch c.name {
			case "am":
				assert.True(t, strings.HasPrefix(src.Verification.Password, "hmac-sha256$"), "a password is kept hashed: %s", src.Verification.Password)
				assert.Equal(t, "am", src.Verification.Username)
			case "tok":
				assert.True(t, strings.HasPrefix(src.Verification.Secret, "hmac-sha256$"), "a URL token is kept hashed: %s", src.Verification.Secret)
			default:
				assert.Equal(t, secret, src.Verification.Secret, "%s: a signing secret is what the receiver signs with", c.name)
			}
			if c.accepts != nil {
				assert.NoError(t, c.accepts(*src.Verification, secret), "%s: the receiver's copy takes the secret shown", c.name)
				assert.Error(t, c.accepts(*src.Verification, secret+"x"), "%s: and nothing else", c.name)
			}

			for who, token := range map[string]string{"owner": owner, "member": member} {
				got := call(t, cp, "GET", base+"/"+r.str("id"), token, nil)
				require.Equal(t, http.StatusOK, got.Status, "%s %s: %s", c.name, who, got.Raw)
				assert.NotContains(t, string(got.Raw), secret, "%s: %s's GET shows no secret", c.name, who)
				gv := got.Body["verification"].(map[string]any)
				assert.Equal(t, true, gv["secret_set"], c.name)
				assert.NotContains(t, gv, "secret")
				assert.NotContains(t, gv, "password")
				assert.Equal(t, testReceiverURL+"/ingest/"+ingestKey, got.str("ingest_url"), "%s: the URL without the token", c.name)
			}
		}
		r := call(t, cp, "GET", base, member, nil)
		require.Equal(t, http.StatusOK, r.Status)
		require.Len(t, r.Body["sources"], 6)
		am := r.Body["sources"].([]any)[3].(map[string]any)
		assert.Equal(t, map[string]any{"scheme": "basic", "username": "am", "secret_set": true}, am["verification"], "what a reader sees of a basic source")
		for _, who := range []string{owner, member} {
			list := string(call(t, cp, "GET", base, who, nil).Raw)
			for _, sec := range shown {
				assert.NotContains(t, list, sec, "lists never show a secret")
			}
		}
		plain := call(t, cp, "POST", base, owner, githubSource("plain"))
		require.Equal(t, http.StatusCreated, plain.Status)
		assert.NotContains(t, plain.Body, "verification", "a source without verification has none")
		assert.Equal(t, "", plain.str("preset"))

		// Nothing the control plane logged holds a secret.
		logs := s.cp.Log()
		for _, sec := range shown {
			assert.NotContains(t, logs, sec)
		}
	})
}

// hmacHex is what GitHub and most HMAC senders put in their header: the body's
// HMAC-SHA256 under the secret, in hex.
func hmacHex(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

func TestSourceVerificationValidation(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startSourceStack(t, db)
		cp := s.cp.URL
		token, _ := s.signup(t, "verify-v@example.com")
		pid := call(t, cp, "POST", "/api/v1/projects", token, map[string]string{"name": "v"}).str("id")
		base := "/api/v1/projects/" + pid + "/sources"
		const apiKey = "sk_live_0123456789abcdefghij"
		for _, c := range []struct {
			name string
			body map[string]any
			msg  string // the message starts with it
		}{
			{"unknown preset", verifiedSource("x", "nagios", nil), `preset: "nagios" is not a preset`},
			{"no scheme", verifiedSource("x", "", map[string]any{}), "verification.scheme is missing"},
			{"unknown scheme", verifiedSource("x", "", map[string]any{"scheme": "rot13"}), `verification.scheme "rot13" is not known`},
			{"stripe API key", verifiedSource("x", "stripe", map[string]any{"scheme": "stripe", "secret": apiKey}), "verification.secret must be the endpoint's signing secret"},
			{"short secret", verifiedSource("x", "", map[string]any{"scheme": "github", "secret": "hunter2"}), "verification.secret is 7 characters long"},
			{"basic without username", verifiedSource("x", "", map[string]any{"scheme": "basic"}), "verification.username is missing"},
			{"hmac without header", verifiedSource("x", "", map[string]any{"scheme": "hmac"}), "verification.header is missing"},
			{"field of another scheme", verifiedSource("x", "", map[string]any{"scheme": "github", "username": "u"}), "verification.username is not used by the github scheme"},
			{"a stored hash as token", verifiedSource("x", "", map[string]any{"scheme": "url_token", "secret": "hmac-sha256$abc$def"}), "verification.secret must be the secret itself"},
			{"token unfit for a URL", verifiedSource("x", "", map[string]any{"scheme": "url_token", "secret": "a/b?c=d&e=fghijklmnop"}), "verification.secret must use only"},
		} {
			r := call(t, cp, "POST", base, token, c.body)
			if assert.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", c.name, r.Raw) {
				assert.Equal(t, "invalid_body", r.code(), c.name)
				assert.True(t, strings.HasPrefix(r.message(), c.msg), "%s: %q", c.name, r.message())
				assert.NotContains(t, string(r.Raw), apiKey, "%s: errors never repeat a secret", c.name)
			}
		}
		r := call(t, cp, "POST", base, token, map[string]any{"name": "x", "verification": map[string]any{"scheme": "github", "secrett": "x"}})
		assert.Equal(t, http.StatusBadRequest, r.Status, "a misspelt verification field is refused")
		assert.Contains(t, r.message(), "secrett")
		r = call(t, cp, "POST", base, token, map[string]any{"name": "x", "verification": map[string]any{"scheme": "github", "secret_set": true}})
		assert.Equal(t, http.StatusBadRequest, r.Status, "secret_set is an answer's, not a setting")
		assert.Empty(t, call(t, cp, "GET", base, token, nil).Body["sources"], "nothing was created")
	})
}

// Stripe, PagerDuty, Sentry and Slack show their signing secret only once they have the
// source's URL, so creating one of their sources takes no secret: reads say secret_set
// false, the receiver's copy refuses everything saying how to set it, and rotate-secret
// with the sender's secret makes its signed deliveries pass.
func TestSourceProviderSecretLater(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startSourceStack(t, db)
		cp := s.cp.URL
		token, _ := s.signup(t, "later@example.com")
		pid := call(t, cp, "POST", "/api/v1/projects", token, map[string]string{"name": "later"}).str("id")
		base := "/api/v1/projects/" + pid + "/sources"
		m := openMirror(t, s.nats.URL())
		for scheme, preset := range map[string]string{"stripe": "stripe", "sentry": "sentry", "pagerduty": "pagerduty", "slack": ""} {
			created := call(t, cp, "POST", base, token, verifiedSource(scheme, preset, map[string]any{"scheme": scheme}))
			require.Equal(t, http.StatusCreated, created.Status, "%s: %s", scheme, created.Raw)
			assert.Equal(t, map[string]any{"scheme": scheme, "secret_set": false}, created.Body["verification"], scheme)
			got := call(t, cp, "GET", base+"/"+created.str("id"), token, nil)
			assert.Equal(t, map[string]any{"scheme": scheme, "secret_set": false}, got.Body["verification"], scheme)
			err := sourceverify.Verify(*mirrored(t, m, created.str("ingest_key")).Verification, http.Header{}, "", []byte(`{}`), time.Now())
			require.Error(t, err, scheme)
			assert.Contains(t, err.Error(), "this source's signing secret has not been set yet", scheme)
		}

		st := call(t, cp, "POST", base, token, verifiedSource("stripe2", "stripe", map[string]any{"scheme": "stripe"}))
		require.Equal(t, http.StatusCreated, st.Status)
		rotate := base + "/" + st.str("id") + "/rotate-secret"
		r := call(t, cp, "POST", rotate, token, nil)
		assert.Equal(t, http.StatusBadRequest, r.Status, "rotating still needs the sender's secret")
		assert.True(t, strings.HasPrefix(r.message(), "verification.secret is required for the stripe scheme"), r.message())
		secret := "whsec_" + strings.Repeat("ab12", 8)
		r = call(t, cp, "POST", rotate, token, map[string]string{"secret": secret})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		assert.Equal(t, true, r.Body["verification"].(map[string]any)["secret_set"])
		assert.Equal(t, true, call(t, cp, "GET", base+"/"+st.str("id"), token, nil).Body["verification"].(map[string]any)["secret_set"])
		body := []byte(`{"id":"evt_1","object":"event","type":"invoice.paid","data":{"object":{}}}`)
		signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret})
		require.Eventually(t, func() bool {
			c := *mirrored(t, m, st.str("ingest_key")).Verification
			return sourceverify.Verify(c, http.Header{"Stripe-Signature": {signed.Header}}, "", body, time.Now()) == nil
		}, time.Second, 10*time.Millisecond, "Stripe's signed deliveries pass once its secret is pasted")
	})
}

// Rotating replaces what the mirror holds in the same transaction: the old secret stops
// working and the new one works, within a second. Members cannot rotate, other projects'
// users do not see the source at all.
func TestSourceRotateSecret(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startSourceStack(t, db)
		cp := s.cp.URL
		owner, _ := s.signup(t, "rot-owner@example.com")
		member, _ := s.signup(t, "rot-member@example.com")
		stranger, _ := s.signup(t, "rot-stranger@example.com")
		admin, _ := s.signup(t, "rot-admin@example.com")
		pid := call(t, cp, "POST", "/api/v1/projects", owner, map[string]string{"name": "a"}).str("id")
		require.Equal(t, http.StatusCreated, call(t, cp, "POST", "/api/v1/projects/"+pid+"/members", owner, map[string]string{"email": "rot-member@example.com"}).Status)
		require.Equal(t, http.StatusCreated, call(t, cp, "POST", "/api/v1/projects/"+pid+"/members", owner, map[string]string{"email": "rot-admin@example.com", "role": "admin"}).Status)
		base := "/api/v1/projects/" + pid + "/sources"
		m := openMirror(t, s.nats.URL())

		created := call(t, cp, "POST", base, owner, verifiedSource("tok", "", map[string]any{"scheme": "url_token"}))
		require.Equal(t, http.StatusCreated, created.Status, "%s", created.Raw)
		id, ingestKey := created.str("id"), created.str("ingest_key")
		oldToken := created.Body["verification"].(map[string]any)["secret"].(string)
		rotate := base + "/" + id + "/rotate-secret"

		// A member reads the source but cannot rotate; a stranger does not see it.
		r := call(t, cp, "POST", rotate, member, nil)
		assert.Equal(t, http.StatusForbidden, r.Status, "%s", r.Raw)
		assert.Equal(t, "forbidden", r.code())
		r = call(t, cp, "POST", rotate, stranger, nil)
		assert.Equal(t, http.StatusNotFound, r.Status, "%s", r.Raw)
		assert.Equal(t, "not_found", r.code())
		assert.Equal(t, http.StatusNotFound, call(t, cp, "GET", base+"/"+id, stranger, nil).Status)
		require.NoError(t, sourceverify.Verify(*mirrored(t, m, ingestKey).Verification, nil, oldToken, nil, time.Now()), "refusals changed nothing")

		// The stranger's own project cannot reach the source by its id either.
		other := call(t, cp, "POST", "/api/v1/projects", stranger, map[string]string{"name": "b"}).str("id")
		r = call(t, cp, "POST", "/api/v1/projects/"+other+"/sources/"+id+"/rotate-secret", stranger, nil)
		assert.Equal(t, http.StatusNotFound, r.Status, "%s", r.Raw)
		assert.Equal(t, http.StatusNotFound, call(t, cp, "GET", "/api/v1/projects/"+other+"/sources/"+id, stranger, nil).Status)

		r = call(t, cp, "POST", rotate, owner, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		newToken := r.Body["verification"].(map[string]any)["secret"].(string)
		assert.Regexp(t, `^[A-Za-z0-9_-]{43}$`, newToken)
		assert.NotEqual(t, oldToken, newToken)
		assert.Equal(t, testReceiverURL+"/ingest/"+ingestKey+"/"+newToken, r.str("ingest_url"), "the new URL, shown once")
		assert.Equal(t, id, r.str("id"))
		assert.Empty(t, r.str("api_key"), "rotating the verification leaves the API key alone")
		require.Eventually(t, func() bool {
			c := *mirrored(t, m, ingestKey).Verification
			return sourceverify.Verify(c, nil, oldToken, nil, time.Now()) != nil && sourceverify.Verify(c, nil, newToken, nil, time.Now()) == nil
		}, time.Second, 10*time.Millisecond, "the receiver's copy takes the new token and refuses the old one within a second")
		got := call(t, cp, "GET", base+"/"+id, owner, nil)
		assert.NotContains(t, string(got.Raw), newToken, "shown once")
		assert.Equal(t, testReceiverURL+"/ingest/"+ingestKey, got.str("ingest_url"))

		// A secret the sender issues must be given; then it is what the mirror holds.
		stripeSecret := "whsec_" + strings.Repeat("cd34", 8)
		st := call(t, cp, "POST", base, owner, verifiedSource("stripe", "stripe", map[string]any{"scheme": "stripe", "secret": stripeSecret}))
		require.Equal(t, http.StatusCreated, st.Status, "%s", st.Raw)
		r = call(t, cp, "POST", base+"/"+st.str("id")+"/rotate-secret", owner, nil)
		assert.Equal(t, http.StatusBadRequest, r.Status)
		assert.True(t, strings.HasPrefix(r.message(), "verification.secret is required for the stripe scheme"), r.message())
		r = call(t, cp, "POST", base+"/"+st.str("id")+"/rotate-secret", owner, map[string]string{"secret": "sk_test_0123456789abcdef"})
		assert.Equal(t, http.StatusBadRequest, r.Status, "a Stripe API key is not a signing secret")
		assert.NotContains(t, string(r.Raw), "sk_test_0123456789abcdef")
		next := "whsec_" + strings.Repeat("ef56", 8)
		r = call(t, cp, "POST", base+"/"+st.str("id")+"/rotate-secret", owner, map[string]string{"secret": next})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		assert.Equal(t, next, r.Body["verification"].(map[string]any)["secret"])
		require.Eventually(t, func() bool {
			return mirrored(t, m, st.str("ingest_key")).Verification.Secret == next
		}, time.Second, 10*time.Millisecond)
		assert.Equal(t, "stripe", mirrored(t, m, st.str("ingest_key")).Preset, "the rest of the source stays")

		// A basic source gets a new password, its user name kept; an admin may rotate.
		bs := call(t, cp, "POST", base, owner, verifiedSource("am", "alertmanager", map[string]any{"scheme": "basic", "username": "am"}))
		require.Equal(t, http.StatusCreated, bs.Status)
		oldPass := bs.Body["verification"].(map[string]any)["password"].(string)
		r = call(t, cp, "POST", base+"/"+bs.str("id")+"/rotate-secret", admin, map[string]any{})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		newPass := r.Body["verification"].(map[string]any)["password"].(string)
		c := *mirrored(t, m, bs.str("ingest_key")).Verification
		assert.NoError(t, sourceverify.Verify(c, basicAuth("am", newPass), "", nil, time.Now()))
		assert.Error(t, sourceverify.Verify(c, basicAuth("am", oldPass), "", nil, time.Now()))

		// Nothing to rotate without a verification; an unknown source is not found.
		plain := call(t, cp, "POST", base, owner, githubSource("plain"))
		r = call(t, cp, "POST", base+"/"+plain.str("id")+"/rotate-secret", owner, nil)
		assert.Equal(t, http.StatusBadRequest, r.Status)
		assert.Contains(t, r.message(), "no verification")
		assert.Equal(t, http.StatusNotFound, call(t, cp, "POST", base+"/src_0000000000000000/rotate-secret", owner, nil).Status)
		r = call(t, cp, "POST", rotate, owner, map[string]any{"secrett": "x"})
		assert.Equal(t, http.StatusBadRequest, r.Status, "a misspelt field is refused")

		// While NATS is away nothing rotates: the answer would show a secret that never
		// reached the receiver.
		s.nats.Stop()
		r = call(t, cp, "POST", rotate, owner, nil)
		assert.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r.Raw)
		assert.NotContains(t, r.Body, "verification")
	})
}

// signGitHub signs body with GitHub's own library (@octokit/webhooks-methods), pinned in
// internal/sourceverify/testdata/signers, and returns the header GitHub sends. Without node
// or the installed packages the test is skipped, except under CI=true.
func signGitHub(t *testing.T, secret string, body []byte) string {
	t.Helper()
	dir := filepath.Join("..", "internal", "sourceverify", "testdata", "signers")
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "node_modules", "@octokit", "webhooks-methods"))
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("signing with octokit needs node and `make test`'s npm ci in %s: %v", dir, err)
		}
		t.Skipf("skipping: signing with octokit needs node and npm ci in %s: %v", dir, err)
	}
	in, err := json.Marshal([]map[string]any{{"scheme": "github", "secret": secret, "body": string(body)}})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "sign.mjs")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	require.NoError(t, err)
	var hs []map[string]string
	require.NoError(t, json.Unmarshal(out, &hs))
	return hs[0]["X-Hub-Signature-256"]
}

// The test endpoint reads a sample with the preset, builds every event's record, and with
// headers says whether the receiver would take the request; nothing is stored.
func TestSourceTestPresetsAndVerification(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startSourceStack(t, db)
		cp := s.cp.URL
		owner, _ := s.signup(t, "pt-owner@example.com")
		member, _ := s.signup(t, "pt-member@example.com")
		pid := call(t, cp, "POST", "/api/v1/projects", owner, map[string]string{"name": "t"}).str("id")
		require.Equal(t, http.StatusCreated, call(t, cp, "POST", "/api/v1/projects/"+pid+"/members", owner, map[string]string{"email": "pt-member@example.com"}).Status)
		test := "/api/v1/projects/" + pid + "/sources/test"

		// Alertmanager: one record per alert.
		alerts := map[string]any{"version": "4", "groupKey": "{}:{alertname=\"Down\"}", "status": "firing", "receiver": "svc",
			"alerts": []any{
				map[string]any{"status": "firing", "labels": map[string]any{"alertname": "Down", "instance": "a"}, "annotations": map[string]any{"summary": "a is down"},
					"startsAt": "2024-05-01T12:00:00Z", "fingerprint": "f1"},
				map[string]any{"status": "resolved", "labels": map[string]any{"alertname": "Down", "instance": "b"},
					"startsAt": "2024-05-01T11:00:00Z", "endsAt": "2024-05-01T11:30:00Z", "fingerprint": "f2"},
			}}
		r := call(t, cp, "POST", test, member, map[string]any{"source": verifiedSource("am", "alertmanager", nil), "payload": alerts})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		events := r.Body["events"].([]any)
		require.Len(t, events, 2, "a 2-alert notification is 2 records")
		first, second := events[0].(map[string]any), events[1].(map[string]any)
		assert.Equal(t, "alert.firing", first["event_type"])
		assert.Equal(t, "alert.resolved", second["event_type"])
		assert.Equal(t, "a is down", first["envelope"].(map[string]any)["text"])
		assert.Equal(t, "b", second["envelope"].(map[string]any)["labels"].(map[string]any)["instance"])
		assert.Equal(t, first["envelope"], r.Body["envelope"], "the top-level fields are the first event's")
		assert.Equal(t, "alert.firing", r.Body["event_type"])
		assert.NotContains(t, r.Body, "verification", "no verification, no verdict")

		// GitHub, signed by GitHub's own library: the sample passes; changed, it does not.
		secret := strings.Repeat("0123456789abcdef", 4)
		sample := `{"action":"opened","pull_request":{"number":7,"title":"Fix it"},"repository":{"full_name":"acme/api"}}`
		sig := signGitHub(t, secret, []byte(sample))
		src := verifiedSource("gh", "github", map[string]any{"scheme": "github", "secret": secret})
		headers := map[string]string{"X-GitHub-Event": "pull_request", "X-GitHub-Delivery": "d-1", "X-Hub-Signature-256": sig}
		r = call(t, cp, "POST", test, owner, map[string]any{"source": src, "headers": headers, "payload": sample})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		assert.Equal(t, map[string]any{"ok": true, "message": "the request passes the github verification: the receiver would accept it"}, r.Body["verification"])
		assert.Equal(t, "pull_request.opened", r.Body["event_type"])
		assert.NotContains(t, string(r.Raw), secret, "the answer never repeats the secret")
		assert.NotContains(t, string(r.Raw), sig, "nor the signature header")

		r = call(t, cp, "POST", test, owner, map[string]any{"source": src, "headers": headers, "payload": strings.Replace(sample, "Fix it", "Fix it!", 1)})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		v := r.Body["verification"].(map[string]any)
		assert.Equal(t, false, v["ok"])
		assert.Contains(t, v["message"], "X-Hub-Signature-256")
		assert.NotContains(t, string(r.Raw), secret)

		// A saved source is tested with what it stored; the sample as a JSON object counts
		// byte for byte as sent.
		saved := call(t, cp, "POST", "/api/v1/projects/"+pid+"/sources", owner, src)
		require.Equal(t, http.StatusCreated, saved.Status, "%s", saved.Raw)
		r = call(t, cp, "POST", test, owner, map[string]any{"source_id": saved.str("id"), "headers": headers, "payload": json.RawMessage(sample)})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		assert.Equal(t, true, r.Body["verification"].(map[string]any)["ok"], "%s", r.Raw)
		// A member tests the mapping but cannot try samples against a secret they may not
		// see (a guess-checker otherwise).
		r = call(t, cp, "POST", test, member, map[string]any{"source_id": saved.str("id"), "headers": headers, "payload": json.RawMessage(sample)})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		assert.Equal(t, "pull_request.opened", r.Body["event_type"])
		v = r.Body["verification"].(map[string]any)
		assert.Equal(t, false, v["ok"], "%s", r.Raw)
		assert.Contains(t, v["message"], "owner and admins")
		// ... or with a secret about to replace it, at the top level.
		r = call(t, cp, "POST", test, member, map[string]any{"source_id": saved.str("id"), "verification": map[string]any{"scheme": "github", "secret": strings.Repeat("f", 64)},
			"headers": headers, "payload": sample})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		assert.Equal(t, false, r.Body["verification"].(map[string]any)["ok"])
		// A verification whose secret is left out (a new source gets one) cannot check.
		r = call(t, cp, "POST", test, owner, map[string]any{"source": verifiedSource("gh2", "github", map[string]any{"scheme": "github"}), "headers": headers, "payload": sample})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		v = r.Body["verification"].(map[string]any)
		assert.Equal(t, false, v["ok"])
		assert.Contains(t, v["message"], "verification.secret")

		// Stripe, signed by stripe-go.
		stripeSecret := "whsec_" + strings.Repeat("9a8b", 8)
		event := []byte(`{"id":"evt_1","object":"event","type":"invoice.paid","created":1714564800,"data":{"object":{"id":"in_1"}}}`)
		signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: event, Secret: stripeSecret, Timestamp: time.Now()})
		stripeSrc := verifiedSource("stripe", "stripe", map[string]any{"scheme": "stripe", "secret": stripeSecret})
		r = call(t, cp, "POST", test, owner, map[string]any{"source": stripeSrc, "headers": map[string]string{"Stripe-Signature": signed.Header}, "payload": string(event)})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		assert.Equal(t, true, r.Body["verification"].(map[string]any)["ok"], "%s", r.Raw)
		assert.Equal(t, "invoice.paid", r.Body["event_type"])
		old := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: event, Secret: stripeSecret, Timestamp: time.Now().Add(-time.Hour)})
		r = call(t, cp, "POST", test, owner, map[string]any{"source": stripeSrc, "headers": map[string]string{"Stripe-Signature": old.Header}, "payload": string(event)})
		require.Equal(t, http.StatusOK, r.Status)
		assert.Equal(t, false, r.Body["verification"].(map[string]any)["ok"], "an hour-old signature is a replay")

		// Basic and URL tokens.
		basic := verifiedSource("am", "alertmanager", map[string]any{"scheme": "basic", "username": "am", "password": "correct-horse-battery"})
		r = call(t, cp, "POST", test, owner, map[string]any{"source": basic, "payload": alerts,
			"headers": map[string]string{"Authorization": basicAuth("am", "correct-horse-battery").Get("Authorization")}})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		assert.Equal(t, true, r.Body["verification"].(map[string]any)["ok"])
		assert.NotContains(t, string(r.Raw), "correct-horse-battery")
		r = call(t, cp, "POST", test, owner, map[string]any{"source": basic, "payload": alerts, "headers": map[string]string{}})
		assert.Equal(t, false, r.Body["verification"].(map[string]any)["ok"], "no Authorization header: %s", r.Raw)
		tok := verifiedSource("tok", "", map[string]any{"scheme": "url_token", "secret": "abcdefghijklmnop1234"})
		r = call(t, cp, "POST", test, owner, map[string]any{"source": tok, "url_token": "abcdefghijklmnop1234", "payload": map[string]any{"a": 1}})
		assert.Equal(t, true, r.Body["verification"].(map[string]any)["ok"], "%s", r.Raw)

		// A preset alone tries the defaults; CloudEvents batches are arrays.
		batch := `[{"specversion":"1.0","id":"1","source":"/jobs","type":"job.done","data":{"n":1}},{"specversion":"1.0","id":"2","source":"/jobs","type":"job.failed","data":{"n":2}}]`
		r = call(t, cp, "POST", test, owner, map[string]any{"preset": "cloudevents", "headers": map[string]string{"Content-Type": "application/cloudevents-batch+json"}, "payload": json.RawMessage(batch)})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		require.Len(t, r.Body["events"], 2)
		assert.Equal(t, "job.failed", r.Body["events"].([]any)[1].(map[string]any)["event_type"])

		for name, c := range map[string]struct {
			body  map[string]any
			inMsg string
		}{
			"unreadable for the preset": {map[string]any{"source": verifiedSource("x", "alertmanager", nil), "payload": map[string]any{"alerts": "no"}}, "payload: the alertmanager preset cannot read it"},
			"unknown top-level preset":  {map[string]any{"source": githubSource("x"), "preset": "nope", "payload": map[string]any{}}, `preset: "nope"`},
			"bad header name":           {map[string]any{"source": githubSource("x"), "headers": map[string]string{"Bad Header": "x"}, "payload": map[string]any{}}, `headers["Bad Header"]`},
			"header with a line break":  {map[string]any{"source": githubSource("x"), "headers": map[string]string{"X-A": "a\r\nb"}, "payload": map[string]any{}}, `headers["X-A"]`},
			"invalid verification":      {map[string]any{"source": verifiedSource("x", "", map[string]any{"scheme": "hmac", "secret": secret}), "payload": map[string]any{}}, "source.verification.header"},
		} {
			r := call(t, cp, "POST", test, owner, c.body)
			assert.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", name, r.Raw)
			assert.True(t, strings.HasPrefix(r.message(), c.inMsg), "%s: %q", name, r.message())
		}
		assert.Len(t, call(t, cp, "GET", "/api/v1/projects/"+pid+"/sources", owner, nil).Body["sources"], 1, "testing stores nothing")
	})
}
