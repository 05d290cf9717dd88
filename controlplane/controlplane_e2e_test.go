package main

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

func ingest(t *testing.T, base, key string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/v1/events", strings.NewReader(`{"hello":"world"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

func TestSignupLoginKeyReachesTheReceiver(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startStack(t, db)
		col := s.receiver(t)
		cp := s.cp.URL

		token, _ := s.signup(t, "Ops@Example.com")
		r := call(t, cp, "POST", "/api/v1/auth/signup", "", map[string]string{"email": "ops@example.com", "password": "another password"})
		assert.Equal(t, http.StatusConflict, r.Status, "duplicate email")
		assert.Equal(t, "conflict", r.code())

		// A failed login is 401 invalid_credentials, the same for a wrong password and an
		// unknown email, so the answer does not tell which accounts exist.
		r = call(t, cp, "POST", "/api/v1/auth/login", "", map[string]string{"email": "ops@example.com", "password": "wrong password"})
		assert.Equal(t, http.StatusUnauthorized, r.Status)
		assert.Equal(t, "invalid_credentials", r.code())
		r = call(t, cp, "POST", "/api/v1/auth/login", "", map[string]string{"email": "nobody@example.com", "password": "wrong password"})
		assert.Equal(t, http.StatusUnauthorized, r.Status)
		assert.Equal(t, "invalid_credentials", r.code())
		r = call(t, cp, "POST", "/api/v1/auth/login", "", map[string]string{"email": "OPS@example.com", "password": "correct horse battery"})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		token = r.str("token")
		me := call(t, cp, "GET", "/api/v1/me", token, nil)
		assert.Equal(t, "ops@example.com", me.str("email"))

		p := call(t, cp, "POST", "/api/v1/projects", token, map[string]string{"name": "shop"})
		require.Equal(t, http.StatusCreated, p.Status, "%s", p.Raw)
		pid := p.str("id")
		k := call(t, cp, "POST", "/api/v1/projects/"+pid+"/keys", token, map[string]string{"name": "ci"})
		require.Equal(t, http.StatusCreated, k.Status, "%s", k.Raw)
		key := k.str("key")
		require.True(t, strings.HasPrefix(key, k.str("prefix")))
		created := time.Now()
		require.Eventually(t, func() bool { return ingest(t, col.HTTP, key) == http.StatusAccepted }, time.Second, 10*time.Millisecond,
			"a new key is accepted by the receiver within 1 s")
		t.Logf("key accepted %v after creation", time.Since(created))

		// The data plane does not need the control plane to keep serving.
		s.cp.Kill()
		assert.Equal(t, http.StatusAccepted, ingest(t, col.HTTP, key), "ingestion goes on while the control plane is down")
		s.cp.Start()

		list := call(t, cp, "GET", "/api/v1/projects/"+pid+"/keys", token, nil)
		require.Equal(t, http.StatusOK, list.Status)
		assert.NotContains(t, string(list.Raw), key, "the key is shown only once")
		assert.Contains(t, string(list.Raw), k.str("prefix"))
		require.Eventually(t, func() bool {
			keys := call(t, cp, "GET", "/api/v1/projects/"+pid+"/keys", token, nil).Body["keys"].([]any)
			return len(keys) == 1 && keys[0].(map[string]any)["last_used_at"] != nil
		}, 5*time.Second, 50*time.Millisecond, "the listing shows when the key was last used")

		r = call(t, cp, "DELETE", "/api/v1/projects/"+pid+"/keys/"+k.str("id"), token, nil)
		require.Equal(t, http.StatusNoContent, r.Status)
		revoked := time.Now()
		require.Eventually(t, func() bool { return ingest(t, col.HTTP, key) == http.StatusUnauthorized }, time.Second, 10*time.Millisecond,
			"a deleted key is refused within 1 s")
		t.Logf("key refused %v after deletion", time.Since(revoked))

		// Deleting the project revokes its keys and removes its streams.
		key2 := call(t, cp, "POST", "/api/v1/projects/"+pid+"/keys", token, map[string]string{"name": "k2"}).str("key")
		require.Eventually(t, func() bool { return ingest(t, col.HTTP, key2) == http.StatusAccepted }, time.Second, 10*time.Millisecond)
		_, js := testenv.Connect(t, s.nats.URL())
		_, err := js.Stream(context.Background(), streams.RawStream(pid))
		require.NoError(t, err, "the raw stream exists once events arrived")
		require.Equal(t, http.StatusNoContent, call(t, cp, "DELETE", "/api/v1/projects/"+pid, token, nil).Status)
		require.Eventually(t, func() bool { return ingest(t, col.HTTP, key2) == http.StatusUnauthorized }, time.Second, 10*time.Millisecond)
		_, err = js.Stream(context.Background(), streams.RawStream(pid))
		assert.ErrorIs(t, err, jetstream.ErrStreamNotFound, "the project's streams are removed")
	})
}

func TestBadTokensAreRefused(t *testing.T) {
	databases(t, testBadTokens)
}

func testBadTokens(t *testing.T, db map[string]string) {
	s := startStack(t, db)
	token, uid := s.signup(t, "a@example.com")
	sign := func(secret string, exp time.Time) string {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
			"sub": uid, "iss": "otelcol-svc", "purpose": "login", "iat": time.Now().Unix(), "exp": exp.Unix(),
		}).SignedString([]byte(secret))
		require.NoError(t, err)
		return tok
	}
	for name, tok := range map[string]string{
		"expired":  sign(testJWTSecret, time.Now().Add(-time.Minute)),
		"forged":   sign("some-other-secret-some-other-secret-00", time.Now().Add(time.Hour)),
		"tampered": token[:len(token)-2] + "xx",
		"garbage":  "not-a-jwt",
		"none":     "",
	} {
		r := call(t, s.cp.URL, "GET", "/api/v1/me", tok, nil)
		assert.Equal(t, http.StatusUnauthorized, r.Status, name)
		assert.Equal(t, "invalid_token", r.code(), name)
	}
	assert.Equal(t, http.StatusOK, call(t, s.cp.URL, "GET", "/api/v1/me", sign(testJWTSecret, time.Now().Add(time.Hour)), nil).Status,
		"a token signed with the configured secret works")
}

func TestLoginIsRateLimited(t *testing.T) {
	databases(t, testLoginRateLimit)
}

func testLoginRateLimit(t *testing.T, db map[string]string) {
	s := startStack(t, db)
	s.signup(t, "victim@example.com")
	var last reply
	for i := 0; i < 12; i++ {
		last = call(t, s.cp.URL, "POST", "/api/v1/auth/login", "", map[string]string{"email": "victim@example.com", "password": "guess " + string(rune('a'+i))})
	}
	assert.Equal(t, http.StatusTooManyRequests, last.Status)
	assert.Equal(t, "rate_limited", last.code())
	r := call(t, s.cp.URL, "POST", "/api/v1/auth/login", "", map[string]string{"email": "victim@example.com", "password": "correct horse battery"})
	assert.Equal(t, http.StatusTooManyRequests, r.Status, "even the right password waits once the limit is reached")
}

func TestInvalidOTTLNamesTheFieldAndPosition(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startStack(t, db)
		token, _ := s.signup(t, "o@example.com")
		pid := call(t, s.cp.URL, "POST", "/api/v1/projects", token, map[string]string{"name": "p"}).str("id")
		pos := regexp.MustCompile(`\d+:\d+`)
		for field, body := range map[string]map[string]any{
			"trigger":        {"trigger": `severity_number >>> 3`},
			"transforms":     {"transforms": []string{`set(event["a"], 1)`, `set(event["b"], 2`}},
			"context_filter": {"window_enabled": true, "context_filter": `body == `},
			"group_key":      {"window_enabled": true, "group_key": `resource_attributes["k8s.pod.name"`},
		} {
			r := call(t, s.cp.URL, "PUT", "/api/v1/projects/"+pid+"/pipeline", token, body)
			require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", field, r.Raw)
			assert.Equal(t, "invalid_pipeline", r.code())
			assert.True(t, strings.HasPrefix(r.message(), field+":"), "%s: %s", field, r.message())
			assert.Regexp(t, pos, r.message(), "the parser's position")
		}
		r := call(t, s.cp.URL, "PUT", "/api/v1/projects/"+pid+"/pipeline", token, map[string]any{"transforms": []string{`set(event["a"], 1)`, `set(event["b"], 2`}})
		assert.Contains(t, r.message(), "statement 1", "the failing statement's index")
		r = call(t, s.cp.URL, "PUT", "/api/v1/projects/"+pid+"/pipeline", token, map[string]any{"agent_endpoint_url": "https://user:pw@agent.example.com/"})
		assert.Equal(t, "invalid_pipeline", r.code())
		assert.True(t, strings.HasPrefix(r.message(), "agent_endpoint_url:"))

		good := call(t, s.cp.URL, "PUT", "/api/v1/projects/"+pid+"/pipeline", token, map[string]any{
			"trigger": `severity_number >= 17 and resource_attributes["service.name"] == "checkout"`, "agent_endpoint_url": "https://agent.example.com/hook",
		})
		require.Equal(t, http.StatusOK, good.Status, "%s", good.Raw)
		assert.EqualValues(t, 10, good.Body["batch_size"], "defaults filled")
		assert.EqualValues(t, 300, good.Body["window_duration_seconds"])
		assert.True(t, strings.HasPrefix(good.str("signing_secret"), "whsec_"))
	})
}

// A control plane restarted on the same database keeps everything, and rebuilds the
// mirror of a NATS that lost it.
func TestRestartKeepsEverythingAndRebuildsTheMirror(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startStack(t, db)
		token, _ := s.signup(t, "keep@example.com")
		pid := call(t, s.cp.URL, "POST", "/api/v1/projects", token, map[string]string{"name": "kept"}).str("id")
		key := call(t, s.cp.URL, "POST", "/api/v1/projects/"+pid+"/keys", token, map[string]string{"name": "k"}).str("key")
		require.Equal(t, http.StatusOK, call(t, s.cp.URL, "PUT", "/api/v1/projects/"+pid+"/pipeline", token, map[string]any{"trigger": `status == "failed"`}).Status)

		// The control plane goes away and NATS comes back empty.
		s.cp.Kill()
		s.nats.Stop()
		fresh := testenv.StartNATS(t)
		s.cp.Env["NATS_URL"] = fresh.URL()
		s.cp.Start()

		r := call(t, s.cp.URL, "POST", "/api/v1/auth/login", "", map[string]string{"email": "keep@example.com", "password": "correct horse battery"})
		require.Equal(t, http.StatusOK, r.Status)
		token = r.str("token")
		assert.Equal(t, "kept", call(t, s.cp.URL, "GET", "/api/v1/projects/"+pid, token, nil).str("name"))
		assert.Equal(t, `status == "failed"`, call(t, s.cp.URL, "GET", "/api/v1/projects/"+pid+"/pipeline", token, nil).str("trigger"))

		col := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/receiver.yaml",
			Env: map[string]string{"NATS_URL": fresh.URL(), "SVC_STREAM_REPLICAS": "1"}})
		require.Eventually(t, func() bool { return ingest(t, col.HTTP, key) == http.StatusAccepted }, 10*time.Second, 50*time.Millisecond,
			"the key works again: the mirror was rebuilt from the database")
	})
}
