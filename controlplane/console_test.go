package main

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/consoletoken"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// publishedConsoleKeys reads the console token public keys the receiver verifies with.
func publishedConsoleKeys(t *testing.T, natsURL string) []ed25519.PublicKey {
	t.Helper()
	_, js := testenv.Connect(t, natsURL)
	ms, err := mirror.Open(context.Background(), js, 1)
	require.NoError(t, err)
	var out []ed25519.PublicKey
	require.Eventually(t, func() bool {
		ck, err := ms.ConsoleKeys(context.Background())
		require.NoError(t, err)
		out = out[:0]
		for _, k := range ck.PublicKeys {
			b, err := base64.StdEncoding.DecodeString(k)
			require.NoError(t, err)
			out = append(out, ed25519.PublicKey(b))
		}
		return len(out) > 0
	}, 10*time.Second, 50*time.Millisecond, "the control plane publishes its console public key")
	return out
}

func TestConsoleToken(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startSourceStack(t, db)
		cp := s.cp.URL
		owner, ownerID := s.signup(t, "console@example.com")
		member, memberID := s.signup(t, "viewer@example.com")
		pid := call(t, cp, "POST", "/api/v1/projects", owner, map[string]string{"name": "c"}).str("id")
		require.Equal(t, http.StatusCreated, call(t, cp, "POST", "/api/v1/projects/"+pid+"/members", owner, map[string]string{"email": "viewer@example.com"}).Status)
		keys := publishedConsoleKeys(t, s.nats.URL())

		for who, u := range map[string][2]string{"owner": {owner, ownerID}, "member": {member, memberID}} {
			r := call(t, cp, "POST", "/api/v1/projects/"+pid+"/console-token", u[0], nil)
			require.Equal(t, http.StatusOK, r.Status, "%s: %s", who, r.Raw)
			assert.Equal(t, testReceiverURL, r.str("receiver_url"), who)
			assert.Regexp(t, jwtShape, r.str("token"))
			c, err := consoletoken.Verify(keys, r.str("token"), time.Now())
			require.NoError(t, err, "%s: the token verifies with the published key", who)
			assert.Equal(t, u[1], c.UserID, who)
			assert.Equal(t, map[string]string{"owner": "console@example.com", "member": "viewer@example.com"}[who], c.Email, "%s: actions are recorded by the email", who)
			assert.Equal(t, pid, c.ProjectID, who)
			assert.WithinDuration(t, time.Now().Add(10*time.Minute), c.ExpiresAt, 5*time.Second, "valid 10 minutes")
			exp, err := time.Parse(time.RFC3339, r.str("expires_at"))
			require.NoError(t, err)
			assert.WithinDuration(t, c.ExpiresAt, exp, time.Second)
			_, err = consoletoken.Verify(keys, r.str("token"), time.Now().Add(11*time.Minute))
			assert.Error(t, err, "expired after 10 minutes")
		}
		// A login token is not a console token, nor the other way round.
		_, err := consoletoken.Verify(keys, owner, time.Now())
		assert.Error(t, err)
		console := call(t, cp, "POST", "/api/v1/projects/"+pid+"/console-token", owner, nil).str("token")
		assert.Equal(t, http.StatusUnauthorized, call(t, cp, "GET", "/api/v1/me", console, nil).Status)

		// The key lives in the database: a restarted control plane (or a replica on the
		// same database) signs with it and publishes the same public key.
		s.cp.Kill()
		s.cp.Start()
		again := call(t, cp, "POST", "/api/v1/auth/login", "", map[string]string{"email": "console@example.com", "password": "correct horse battery"}).str("token")
		tok := call(t, cp, "POST", "/api/v1/projects/"+pid+"/console-token", again, nil).str("token")
		_, err = consoletoken.Verify(keys, tok, time.Now())
		assert.NoError(t, err, "a token issued after a restart verifies with the key published before it")
		assert.Equal(t, keys, publishedConsoleKeys(t, s.nats.URL()))
	})
}

// The mirror carries each member's role, so a receiver can let owners and admins (and
// only them) replay deliveries with a console token; a role change reaches it.
func TestMirrorCarriesMemberRoles(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startSourceStack(t, db)
		cp := s.cp.URL
		owner, ownerID := s.signup(t, "roles-owner@example.com")
		_, adminID := s.signup(t, "roles-admin@example.com")
		pid := call(t, cp, "POST", "/api/v1/projects", owner, map[string]string{"name": "r"}).str("id")
		require.Equal(t, http.StatusCreated, call(t, cp, "POST", "/api/v1/projects/"+pid+"/members", owner, map[string]string{"email": "roles-admin@example.com", "role": "member"}).Status)
		_, js := testenv.Connect(t, s.nats.URL())
		kv, err := js.KeyValue(context.Background(), mirror.BucketProjects)
		require.NoError(t, err)
		roles := func() map[string]string {
			e, err := kv.Get(context.Background(), pid)
			require.NoError(t, err)
			var p mirror.Project
			require.NoError(t, json.Unmarshal(e.Value(), &p))
			return p.Roles
		}
		assert.Equal(t, map[string]string{ownerID: "owner", adminID: "member"}, roles())
		require.Equal(t, http.StatusCreated, call(t, cp, "POST", "/api/v1/projects/"+pid+"/members", owner, map[string]string{"email": "roles-admin@example.com", "role": "admin"}).Status)
		assert.Equal(t, "admin", roles()[adminID], "a role change is published")
	})
}
