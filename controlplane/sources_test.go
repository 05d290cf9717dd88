package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/sourceverify"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

const testReceiverURL = "https://ingest.example.com"

// startSourceStack is a stack whose control plane tells users testReceiverURL.
func startSourceStack(t *testing.T, db map[string]string) *stack {
	t.Helper()
	// Stale entries the tests plant are pruned at the next publish, however recent.
	env := map[string]string{"SVC_PUBLIC_RECEIVER_URL": testReceiverURL + "/", "SVC_MIRROR_PRUNE_GRACE": "0s"}
	for k, v := range db {
		env[k] = v
	}
	return startStack(t, env)
}

// githubSource is a GitHub-style webhook keyed by its action.
func githubSource(name string) map[string]any {
	return map[string]any{
		"name": name, "connector": "webhook", "event_type_field": "action",
		"text_template": "{repo.name}: {action}", "event_time_field": "created_at",
		"labels": map[string]string{"repo": "repo.name"},
	}
}

// mirrorView reads the configuration mirror the way the data plane does.
type mirrorView struct {
	keys, sources jetstream.KeyValue
}

func openMirror(t *testing.T, natsURL string) mirrorView {
	t.Helper()
	_, js := testenv.Connect(t, natsURL)
	ctx := context.Background()
	var m mirrorView
	var err error
	require.Eventually(t, func() bool {
		m.keys, err = js.KeyValue(ctx, mirror.BucketKeys)
		if err != nil {
			return false
		}
		m.sources, err = js.KeyValue(ctx, mirror.BucketSources)
		return err == nil
	}, 10*time.Second, 50*time.Millisecond, "the control plane creates the mirror's buckets")
	return m
}

// get decodes an entry into v; false when there is none.
func get(t *testing.T, kv jetstream.KeyValue, key string, v any) bool {
	t.Helper()
	e, err := kv.Get(context.Background(), key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false
	}
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(e.Value(), v))
	return true
}

func TestSourcesCRUD(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startSourceStack(t, db)
		cp := s.cp.URL
		token, _ := s.signup(t, "src@example.com")
		pid := call(t, cp, "POST", "/api/v1/projects", token, map[string]string{"name": "hooks"}).str("id")
		base := "/api/v1/projects/" + pid + "/sources"
		m := openMirror(t, s.nats.URL())

		r := call(t, cp, "POST", base, token, githubSource("github"))
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Raw)
		ingestKey, apiKey, id := r.str("ingest_key"), r.str("api_key"), r.str("id")
		assert.Regexp(t, `^in_[0-9a-f]{32}$`, ingestKey)
		assert.Equal(t, testReceiverURL+"/ingest/"+ingestKey, r.str("ingest_url"), "the public receiver URL, trailing slash dropped")
		assert.True(t, strings.HasPrefix(apiKey, apikey.KindIngest), "an ingest-scoped key: %s", apiKey)
		assert.True(t, strings.HasPrefix(apiKey, r.str("api_key_prefix")))
		assert.Equal(t, "webhook_event", r.str("event_type"), "the default event type")
		assert.Equal(t, map[string]any{"repo": "repo.name"}, r.Body["labels"])

		// The data plane sees the source under its ingest key, and the key as ingest-scoped.
		var src mirror.Source
		require.True(t, get(t, m.sources, ingestKey, &src), "the source is in the mirror")
		assert.Equal(t, mirror.Source{ID: id, ProjectID: pid, Name: "github", Connector: "webhook", EventType: "webhook_event",
			EventTypeField: "action", TextTemplate: "{repo.name}: {action}", EventTimeField: "created_at",
			Labels: map[string]string{"repo": "repo.name"}}, src)
		var ke mirror.KeyEntry
		require.True(t, get(t, m.keys, apikey.Hash(apiKey), &ke), "the API key is in the mirror, by its hash")
		assert.Equal(t, mirror.ScopeIngest, ke.Scope)
		assert.Equal(t, id, ke.SourceID)
		assert.Equal(t, pid, ke.ProjectID)

		// The key is shown once; listings show the URL and the key's prefix.
		list := call(t, cp, "GET", base, token, nil)
		require.Equal(t, http.StatusOK, list.Status)
		assert.NotContains(t, string(list.Raw), apiKey, "the API key is shown only once")
		sources := list.Body["sources"].([]any)
		require.Len(t, sources, 1)
		one := sources[0].(map[string]any)
		assert.Equal(t, r.str("ingest_url"), one["ingest_url"])
		assert.Equal(t, r.str("api_key_prefix"), one["api_key_prefix"])
		got := call(t, cp, "GET", base+"/"+id, token, nil)
		assert.Equal(t, http.StatusOK, got.Status)
		assert.Equal(t, "{repo.name}: {action}", got.str("text_template"))
		assert.NotContains(t, string(got.Raw), apiKey)
		assert.Equal(t, "not_found", call(t, cp, "GET", base+"/src_0000000000000000", token, nil).code())
		keys := call(t, cp, "GET", "/api/v1/projects/"+pid+"/keys", token, nil)
		assert.Contains(t, string(keys.Raw), `"scope":"ingest"`, "the source's key is listed with the project's keys")
		assert.NotContains(t, string(keys.Raw), apiKey)

		dup := call(t, cp, "POST", base, token, githubSource("github"))
		assert.Equal(t, http.StatusConflict, dup.Status, "%s", dup.Raw)
		assert.Equal(t, "conflict", dup.code())
		assert.Contains(t, dup.message(), "github")
		other := call(t, cp, "POST", "/api/v1/projects", token, map[string]string{"name": "other"}).str("id")
		assert.Equal(t, http.StatusCreated, call(t, cp, "POST", "/api/v1/projects/"+other+"/sources", token, githubSource("github")).Status,
			"names are unique per project, not across projects")

		// Delete: both leave the mirror within a second.
		require.Equal(t, http.StatusNoContent, call(t, cp, "DELETE", base+"/"+id, token, nil).Status)
		require.Eventually(t, func() bool {
			return !get(t, m.sources, ingestKey, &src) && !get(t, m.keys, apikey.Hash(apiKey), &ke)
		}, time.Second, 10*time.Millisecond, "a deleted source and its key leave the mirror")
		assert.Empty(t, call(t, cp, "GET", base, token, nil).Body["sources"])
		assert.NotContains(t, string(call(t, cp, "GET", "/api/v1/projects/"+pid+"/keys", token, nil).Raw), `"scope":"ingest"`)
		assert.Equal(t, http.StatusNotFound, call(t, cp, "DELETE", base+"/"+id, token, nil).Status)
		assert.Equal(t, http.StatusCreated, call(t, cp, "POST", base, token, githubSource("github")).Status, "the name is free again")
	})
}

func TestSourceValidation(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startSourceStack(t, db)
		cp := s.cp.URL
		token, _ := s.signup(t, "v@example.com")
		pid := call(t, cp, "POST", "/api/v1/projects", token, map[string]string{"name": "v"}).str("id")
		base := "/api/v1/projects/" + pid + "/sources"
		with := func(k string, v any) map[string]any {
			b := githubSource("ok")
			b[k] = v
			return b
		}
		manyLabels := map[string]string{}
		for i := 0; i < 33; i++ {
			manyLabels[fmt.Sprintf("l%d", i)] = "a"
		}
		cases := []struct {
			name  string
			body  any
			field string // the message starts with it
		}{
			{"no name", with("name", ""), "name"},
			{"blank name", with("name", "   "), "name"},
			{"long name", with("name", strings.Repeat("n", 101)), "name"},
			{"other connector", with("connector", "email"), "connector"},
			{"unclosed placeholder", with("text_template", "{repo.name: {action}"), "text_template"},
			{"open brace at the end", with("text_template", "{repo.name"), "text_template"},
			{"stray closing brace", with("text_template", "done } here"), "text_template"},
			{"empty placeholder", with("text_template", "x {} y"), "text_template"},
			{"bad placeholder path", with("text_template", "{repo..name}"), "text_template"},
			{"empty label path", with("labels", map[string]string{"repo": ""}), `labels["repo"]`},
			{"bad label path", with("labels", map[string]string{"repo": "repo."}), `labels["repo"]`},
			{"bad label name", with("labels", map[string]string{"my label": "a"}), `labels["my label"]`},
			{"empty label name", with("labels", map[string]string{"": "a"}), `labels[""]`},
			{"too many labels", with("labels", manyLabels), "labels"},
			{"bad time path", with("event_time_field", ".created_at"), "event_time_field"},
			{"bad type path", with("event_type_field", "a..b"), "event_type_field"},
			{"control character", with("event_type", "a\nb"), "event_type"},
		}
		for _, c := range cases {
			r := call(t, cp, "POST", base, token, c.body)
			if assert.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", c.name, r.Raw) {
				assert.Equal(t, "invalid_body", r.code(), c.name)
				assert.True(t, strings.HasPrefix(r.message(), c.field), "%s: the message names the field %s: %q", c.name, c.field, r.message())
			}
		}
		r := call(t, cp, "POST", base, token, with("lables", map[string]string{}))
		assert.Equal(t, http.StatusBadRequest, r.Status, "a misspelt field is refused")
		assert.Contains(t, r.message(), "lables")
		r = call(t, cp, "POST", base, token, with("labels", map[string]int{"repo": 1}))
		assert.Equal(t, http.StatusBadRequest, r.Status, "label paths are strings")
		assert.Empty(t, call(t, cp, "GET", base, token, nil).Body["sources"], "nothing was created")

		// Literal braces and spaces inside a placeholder are fine.
		ok := with("text_template", "{{raw}} { repo.name } -> {action}}}")
		assert.Equal(t, http.StatusCreated, call(t, cp, "POST", base, token, ok).Status)
	})
}

// While NATS is away a source cannot be created (its URL would not work): 503 and
// nothing is stored.
func TestSourceNeedsTheMirror(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startSourceStack(t, db)
		cp := s.cp.URL
		token, _ := s.signup(t, "down@example.com")
		pid := call(t, cp, "POST", "/api/v1/projects", token, map[string]string{"name": "d"}).str("id")
		base := "/api/v1/projects/" + pid + "/sources"

		s.nats.Stop()
		r := call(t, cp, "POST", base, token, githubSource("github"))
		assert.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r.Raw)
		assert.Equal(t, "unavailable", r.code())
		assert.Empty(t, call(t, cp, "GET", base, token, nil).Body["sources"], "nothing was stored")

		s.nats.Start(t)
		require.Eventually(t, func() bool {
			return call(t, cp, "POST", base, token, githubSource("github")).Status == http.StatusCreated
		}, 15*time.Second, 100*time.Millisecond, "the name was never taken")
	})
}

// A NATS that lost the mirror gets the sources back from the database, and loses sources
// the database no longer has; deleting a project withdraws its sources.
func TestSourcesResyncAndProjectDeletion(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startSourceStack(t, db)
		cp := s.cp.URL
		token, _ := s.signup(t, "resync@example.com")
		pid := call(t, cp, "POST", "/api/v1/projects", token, map[string]string{"name": "r"}).str("id")
		r := call(t, cp, "POST", "/api/v1/projects/"+pid+"/sources", token, githubSource("github"))
		require.Equal(t, http.StatusCreated, r.Status)
		ingestKey, apiKey := r.str("ingest_key"), r.str("api_key")
		m := openMirror(t, s.nats.URL())
		ctx := context.Background()
		tok := call(t, cp, "POST", "/api/v1/projects/"+pid+"/sources", token, map[string]any{"name": "tok", "verification": map[string]any{"scheme": "url_token"}})
		require.Equal(t, http.StatusCreated, tok.Status, "%s", tok.Raw)
		urlToken := tok.Body["verification"].(map[string]any)["secret"].(string)
		var published mirror.Source
		require.True(t, get(t, m.sources, tok.str("ingest_key"), &published))
		require.NoError(t, m.sources.Delete(ctx, tok.str("ingest_key")))

		// Someone wipes the entries and leaves a stale source behind.
		require.NoError(t, m.sources.Delete(ctx, ingestKey))
		require.NoError(t, m.keys.Delete(ctx, apikey.Hash(apiKey)))
		_, err := m.sources.Put(ctx, "in_stale", []byte(`{"id":"src_gone","project_id":"`+pid+`","name":"gone","connector":"webhook","event_type":"x"}`))
		require.NoError(t, err)

		s.cp.Kill()
		s.cp.Start() // re-publishes at start
		var src mirror.Source
		var ke mirror.KeyEntry
		require.Eventually(t, func() bool {
			return get(t, m.sources, ingestKey, &src) && get(t, m.keys, apikey.Hash(apiKey), &ke) && !get(t, m.sources, "in_stale", &src)
		}, 10*time.Second, 50*time.Millisecond, "resync restores the source and its key and removes the stale source")
		assert.Equal(t, "github", src.Name)
		assert.Equal(t, mirror.ScopeIngest, ke.Scope)
		var restored mirror.Source
		require.Eventually(t, func() bool { return get(t, m.sources, tok.str("ingest_key"), &restored) }, 10*time.Second, 50*time.Millisecond)
		assert.Equal(t, published, restored, "the database keeps the verification as published: the URL token only hashed")
		assert.NoError(t, sourceverify.Verify(*restored.Verification, nil, urlToken, nil, time.Now()), "and the token shown at creation still works")

		login := call(t, cp, "POST", "/api/v1/auth/login", "", map[string]string{"email": "resync@example.com", "password": "correct horse battery"})
		require.Equal(t, http.StatusOK, login.Status)
		require.Equal(t, http.StatusNoContent, call(t, cp, "DELETE", "/api/v1/projects/"+pid, login.str("token"), nil).Status)
		require.Eventually(t, func() bool {
			return !get(t, m.sources, ingestKey, &src) && !get(t, m.keys, apikey.Hash(apiKey), &ke)
		}, time.Second, 10*time.Millisecond, "deleting the project withdraws its sources and their keys")
	})
}

func TestSourceTestShowsTheEnvelopeAndWarnings(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		s := startSourceStack(t, db)
		cp := s.cp.URL
		token, _ := s.signup(t, "preview@example.com")
		pid := call(t, cp, "POST", "/api/v1/projects", token, map[string]string{"name": "p"}).str("id")
		test := "/api/v1/projects/" + pid + "/sources/test"
		payload := map[string]any{"action": "opened", "repo": map[string]any{"name": "acme/api"}, "created_at": "2024-05-01T12:00:00Z", "n": 1}

		r := call(t, cp, "POST", test, token, map[string]any{"source": githubSource("github"), "payload": payload})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		assert.Equal(t, []any{}, r.Body["warnings"], "a complete mapping has no warnings")
		env := r.Body["envelope"].(map[string]any)
		assert.Equal(t, "opened", env["_event_type"])
		assert.Equal(t, "github", env["_source"])
		assert.Equal(t, "acme/api: opened", env["text"])
		assert.Equal(t, map[string]any{"repo": "acme/api"}, env["labels"])
		assert.True(t, strings.HasPrefix(env["timestamp"].(string), "2024-05-01T12:00:00"), "%v", env["timestamp"])
		assert.Equal(t, map[string]any{"action": "opened", "repo": map[string]any{"name": "acme/api"}, "created_at": "2024-05-01T12:00:00Z", "n": float64(1)}, env["payload"])

		// A payload the settings do not fit: every problem is named.
		r = call(t, cp, "POST", test, token, map[string]any{"source": githubSource("github"), "payload": map[string]any{"repo": map[string]any{}, "created_at": "yesterday"}})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		env = r.Body["envelope"].(map[string]any)
		assert.Equal(t, "webhook_event", env["_event_type"], "the source's event type when the field is missing")
		assert.Equal(t, map[string]any{}, env["labels"])
		warnings := fmt.Sprint(r.Body["warnings"])
		for _, want := range []string{`event_type_field "action"`, `"created_at"`, `"repo.name"`, `label "repo"`} {
			assert.Contains(t, warnings, want)
		}
		assert.Len(t, r.Body["warnings"], 5, "missing type field, unparseable time, two template fields, missing label: %s", warnings)

		// A saved source tests the same way, by id.
		created := call(t, cp, "POST", "/api/v1/projects/"+pid+"/sources", token, githubSource("github"))
		require.Equal(t, http.StatusCreated, created.Status)
		r = call(t, cp, "POST", test, token, map[string]any{"source_id": created.str("id"), "payload": payload})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		assert.Equal(t, "acme/api: opened", r.Body["envelope"].(map[string]any)["text"])

		for name, c := range map[string]struct {
			body   map[string]any
			status int
			inMsg  string
		}{
			"array payload":      {map[string]any{"source_id": created.str("id"), "payload": []any{payload}}, 400, "payload"},
			"string payload":     {map[string]any{"source_id": created.str("id"), "payload": "hi"}, 400, "payload"},
			"no payload":         {map[string]any{"source_id": created.str("id")}, 400, "payload"},
			"both":               {map[string]any{"source_id": created.str("id"), "source": githubSource("x"), "payload": payload}, 400, "not both"},
			"neither":            {map[string]any{"payload": payload}, 400, "source"},
			"unknown source":     {map[string]any{"source_id": "src_0000000000000000", "payload": payload}, 404, "source"},
			"invalid source":     {map[string]any{"source": map[string]any{"text_template": "{a"}, "payload": payload}, 400, "source.text_template"},
			"misspelt top field": {map[string]any{"sourceid": "x", "payload": payload}, 400, "sourceid"},
		} {
			r := call(t, cp, "POST", test, token, c.body)
			assert.Equal(t, c.status, r.Status, "%s: %s", name, r.Raw)
			assert.Contains(t, r.message(), c.inMsg, name)
		}
		assert.Len(t, call(t, cp, "GET", "/api/v1/projects/"+pid+"/sources", token, nil).Body["sources"], 1, "testing stores nothing")
	})
}

var jwtShape = regexp.MustCompile(`^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$`)
