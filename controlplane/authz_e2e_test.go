package main

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAuthorizationMatrix calls every project endpoint as the owner, an admin, a member,
// a stranger and nobody, and checks each answer. A stranger's answers are exactly those
// for a project that does not exist.
func TestAuthorizationMatrix(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startStack(t, db)
		cp := s.cp.URL
		owner, _ := s.signup(t, "owner@example.com")
		admin, _ := s.signup(t, "admin@example.com")
		member, memberID := s.signup(t, "member@example.com")
		stranger, _ := s.signup(t, "stranger@example.com")
		_, extraID := s.signup(t, "extra@example.com")

		pid := call(t, cp, "POST", "/api/v1/projects", owner, map[string]string{"name": "matrix"}).str("id")
		p := "/api/v1/projects/" + pid
		require.Equal(t, http.StatusCreated, call(t, cp, "POST", p+"/members", owner, map[string]string{"email": "admin@example.com", "role": "admin"}).Status)
		require.Equal(t, http.StatusCreated, call(t, cp, "POST", p+"/members", owner, map[string]string{"email": "member@example.com", "role": "member"}).Status)

		sink := map[string]any{"kind": "webhook", "url": "https://hooks.example.com/x"}
		// setup runs as the owner before each call, so destructive calls have a target.
		type check struct {
			name   string
			method string
			path   func() string
			body   any
			want   [4]int // owner, admin, member, stranger (nobody always gets 401)
		}
		newKey := func() string {
			return call(t, cp, "POST", p+"/keys", owner, map[string]string{"name": "tmp"}).str("id")
		}
		newSink := func() string { return call(t, cp, "POST", p+"/sinks", owner, sink).str("id") }
		addExtra := func() string {
			call(t, cp, "POST", p+"/members", owner, map[string]string{"email": "extra@example.com"})
			return extraID
		}
		sinkID := newSink()
		// Source names are unique per project: each create gets a fresh one.
		sources := 0
		sourceBody := func() any {
			sources++
			return map[string]any{"name": fmt.Sprintf("source %d", sources), "labels": map[string]string{"repo": "repo.name"}}
		}
		newSource := func() string { return call(t, cp, "POST", p+"/sources", owner, sourceBody()).str("id") }
		sourceID := newSource()
		sourceTest := map[string]any{"source_id": sourceID, "payload": map[string]any{"repo": map[string]any{"name": "a"}}}
		verified := call(t, cp, "POST", p+"/sources", owner, map[string]any{"name": "signed", "verification": map[string]string{"scheme": "github"}}).str("id")
		fixed := func(s string) func() string { return func() string { return s } }
		checks := []check{
			{"get project", "GET", fixed(p), nil, [4]int{200, 200, 200, 404}},
			{"patch project", "PATCH", fixed(p), map[string]string{"name": "renamed"}, [4]int{200, 200, 403, 404}},
			{"list keys", "GET", fixed(p + "/keys"), nil, [4]int{200, 200, 200, 404}},
			{"create key", "POST", fixed(p + "/keys"), map[string]string{"name": "k"}, [4]int{201, 201, 403, 404}},
			{"delete key", "DELETE", func() string { return p + "/keys/" + newKey() }, nil, [4]int{204, 204, 403, 404}},
			{"list members", "GET", fixed(p + "/members"), nil, [4]int{200, 200, 200, 404}},
			{"add member", "POST", fixed(p + "/members"), map[string]string{"email": "extra@example.com", "role": "member"}, [4]int{201, 201, 403, 404}},
			{"remove member", "DELETE", func() string { return p + "/members/" + addExtra() }, nil, [4]int{204, 204, 403, 404}},
			{"get pipeline", "GET", fixed(p + "/pipeline"), nil, [4]int{200, 200, 200, 404}},
			{"put pipeline", "PUT", fixed(p + "/pipeline"), map[string]any{"trigger": `status == "x"`}, [4]int{200, 200, 403, 404}},
			{"rotate secret", "POST", fixed(p + "/pipeline/rotate-secret"), nil, [4]int{200, 200, 403, 404}},
			{"validate pipeline", "POST", fixed(p + "/pipeline/validate"), map[string]any{"trigger": `status == "x"`}, [4]int{200, 200, 200, 404}},
			{"list sinks", "GET", fixed(p + "/sinks"), nil, [4]int{200, 200, 200, 404}},
			{"create sink", "POST", fixed(p + "/sinks"), sink, [4]int{201, 201, 403, 404}},
			{"get sink", "GET", fixed(p + "/sinks/" + sinkID), nil, [4]int{200, 200, 200, 404}},
			{"test sink", "POST", fixed(p + "/sinks/" + sinkID + "/test"), nil, [4]int{200, 200, 403, 404}},
			{"patch sink", "PATCH", fixed(p + "/sinks/" + sinkID), map[string]any{"enabled": false}, [4]int{200, 200, 403, 404}},
			{"delete sink", "DELETE", func() string { return p + "/sinks/" + newSink() }, nil, [4]int{204, 204, 403, 404}},
			{"list sources", "GET", fixed(p + "/sources"), nil, [4]int{200, 200, 200, 404}},
			{"create source", "POST", fixed(p + "/sources"), sourceBody, [4]int{201, 201, 403, 404}},
			{"get source", "GET", fixed(p + "/sources/" + sourceID), nil, [4]int{200, 200, 200, 404}},
			{"test source", "POST", fixed(p + "/sources/test"), sourceTest, [4]int{200, 200, 200, 404}},
			{"rotate source secret", "POST", fixed(p + "/sources/" + verified + "/rotate-secret"), nil, [4]int{200, 200, 403, 404}},
			{"delete source", "DELETE", func() string { return p + "/sources/" + newSource() }, nil, [4]int{204, 204, 403, 404}},
			{"console token", "POST", fixed(p + "/console-token"), nil, [4]int{200, 200, 200, 404}},
			{"delete project", "DELETE", fixed(p), nil, [4]int{0, 403, 403, 404}}, // the owner's delete comes last
		}
		users := []struct {
			name  string
			token string
		}{{"owner", owner}, {"admin", admin}, {"member", member}, {"stranger", stranger}}
		for _, c := range checks {
			for i, u := range users {
				if c.want[i] == 0 {
					continue
				}
				r := call(t, cp, c.method, c.path(), u.token, body(c.body))
				assert.Equal(t, c.want[i], r.Status, "%s as %s: %s", c.name, u.name, r.Raw)
				if u.name == "stranger" {
					// Exactly what a project that does not exist answers.
					missing := call(t, cp, c.method, "/api/v1/projects/p_0000000000000000"+c.path()[len(p):], u.token, body(c.body))
					assert.Equal(t, missing.Raw, r.Raw, "%s: a stranger must not learn the project exists", c.name)
				}
			}
			assert.Equal(t, http.StatusUnauthorized, call(t, cp, c.method, c.path(), "", body(c.body)).Status, "%s without a token", c.name)
		}

		// Secrets: admins see the signing secret, members do not; nobody sees a key again.
		assert.NotEmpty(t, call(t, cp, "GET", p+"/pipeline", admin, nil).str("signing_secret"))
		assert.NotContains(t, call(t, cp, "GET", p+"/pipeline", member, nil).Body, "signing_secret")
		// A stranger's project list does not show it; a member may leave; the owner cannot be removed.
		assert.NotContains(t, string(call(t, cp, "GET", "/api/v1/projects", stranger, nil).Raw), pid)
		assert.Equal(t, http.StatusConflict, call(t, cp, "DELETE", p+"/members/"+ownerID(t, s, owner), admin, nil).Status)
		assert.Equal(t, http.StatusNoContent, call(t, cp, "DELETE", p+"/members/"+memberID, member, nil).Status)
		assert.Equal(t, http.StatusNotFound, call(t, cp, "GET", p, member, nil).Status, "a former member is a stranger")

		assert.Equal(t, http.StatusNoContent, call(t, cp, "DELETE", p, owner, nil).Status)
		assert.Equal(t, http.StatusNotFound, call(t, cp, "GET", p, owner, nil).Status)
	})
}

// body is a check's request body; a func makes a new one for each call.
func body(b any) any {
	if f, ok := b.(func() any); ok {
		return f()
	}
	return b
}

func ownerID(t *testing.T, s *stack, token string) string {
	t.Helper()
	return call(t, s.cp.URL, "GET", "/api/v1/me", token, nil).str("id")
}

// The OAuth consent and connected-app endpoints need a sign-in like every account
// endpoint; a stranger's grant and request ids answer exactly as unknown ones.
func TestOAuthEndpointsAuthorization(t *testing.T) {
	s := startStack(t, map[string]string{"SVC_DATA_DIR": t.TempDir()})
	cp := s.cp.URL
	login, _ := s.signup(t, "oauth-authz@example.com")
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/v1/oauth/requests/oar_x"},
		{"POST", "/api/v1/oauth/requests/oar_x/approve"},
		{"POST", "/api/v1/oauth/requests/oar_x/deny"},
		{"GET", "/api/v1/oauth/grants"},
		{"DELETE", "/api/v1/oauth/grants/ogr_x"},
	} {
		assert.Equal(t, http.StatusUnauthorized, call(t, cp, c.method, c.path, "", nil).Status, "%s %s without a token", c.method, c.path)
		want := http.StatusNotFound
		if c.path == "/api/v1/oauth/grants" {
			want = http.StatusOK
		}
		assert.Equal(t, want, call(t, cp, c.method, c.path, login, nil).Status, "%s %s signed in", c.method, c.path)
	}
}
