package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// A project is created with its streams, or not at all: when the data plane cannot create
// them, the caller is told so (503), and no project that could never receive an event
// is left behind.
func TestProjectCreationCreatesStreamsOrSaysWhy(t *testing.T) {
	s := startStack(t, map[string]string{"SVC_DATA_DIR": t.TempDir()})
	token, _ := s.signup(t, "streams@example.com")
	_, js := testenv.Connect(t, s.nats.URL())
	ctx := context.Background()

	// A stream that already takes every raw subject: NATS refuses any project's raw stream.
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "squatter", Subjects: []string{"svc-ai-raw.>"}})
	require.NoError(t, err)
	r := call(t, s.cp.URL, "POST", "/api/v1/projects", token, map[string]string{"name": "shop"})
	require.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r.Raw)
	assert.Equal(t, "unavailable", r.code())
	assert.Contains(t, r.message(), "streams")
	assert.Contains(t, r.message(), "nothing was created")
	list := call(t, s.cp.URL, "GET", "/api/v1/projects", token, nil)
	require.Equal(t, http.StatusOK, list.Status)
	assert.Empty(t, list.Body["projects"], "a project without streams was left behind")
	names := js.StreamNames(ctx)
	var left []string
	for n := range names.Name() {
		left = append(left, n)
	}
	for _, n := range left {
		assert.NotContains(t, n, "svc-ai-output-", "the half-created project's output stream was left behind")
	}

	require.NoError(t, js.DeleteStream(ctx, "squatter"))
	r = call(t, s.cp.URL, "POST", "/api/v1/projects", token, map[string]string{"name": "shop"})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Raw)
	id := r.str("id")
	for _, name := range []string{streams.RawStream(id), streams.OutputStream(id)} {
		st, err := js.Stream(ctx, name)
		require.NoError(t, err, "stream %s must exist once the project is created", name)
		assert.Equal(t, int64(-1), st.CachedInfo().Config.MaxBytes, "nothing reserved in nats-server's store")
	}
}

// /readyz says what is not ready (NATS, the configuration mirror) while /healthz only
// says the process serves; it turns ready once NATS is there and the mirror published.
func TestReadyzTellsWhatIsNotReady(t *testing.T) {
	n := testenv.StartNATS(t)
	n.Stop()
	cp := testenv.StartControlPlane(t, map[string]string{"NATS_URL": n.URL(), "SVC_JWT_SECRET": testJWTSecret, "SVC_DATA_DIR": t.TempDir()})

	r := call(t, cp.URL, "GET", "/readyz", "", nil)
	require.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r.Raw)
	assert.Equal(t, "not ready", r.str("status"))
	checks, _ := r.Body["checks"].(map[string]any)
	assert.Equal(t, "ok", checks["database"])
	assert.Equal(t, "unreachable", checks["nats"])
	assert.Contains(t, r.message(), "NATS is unreachable")
	assert.Equal(t, http.StatusOK, call(t, cp.URL, "GET", "/healthz", "", nil).Status, "liveness is not readiness")

	n.Start(t)
	require.Eventually(t, func() bool { return call(t, cp.URL, "GET", "/readyz", "", nil).Status == http.StatusOK },
		30*time.Second, 50*time.Millisecond, "not ready after NATS came")
	r = call(t, cp.URL, "GET", "/readyz", "", nil)
	assert.Equal(t, "ready", r.str("status"))
	// Ready means a project can be created right away.
	token := call(t, cp.URL, "POST", "/api/v1/auth/signup", "", map[string]string{"email": "ready@example.com", "password": "correct horse battery"}).str("token")
	assert.Equal(t, http.StatusCreated, call(t, cp.URL, "POST", "/api/v1/projects", token, map[string]string{"name": "now"}).Status)
}

// The mirror is not rewritten on a timer (with thousands of projects every data-plane
// process would re-read them all; bench/tenants measures the idle cost), but a NATS whose
// buckets were created anew (wiped, replaced) gets everything again within the check
// interval.
func TestMirrorRepublishedWhenItsBucketsAreNew(t *testing.T) {
	n := testenv.StartNATS(t)
	cp := testenv.StartControlPlane(t, map[string]string{"NATS_URL": n.URL(), "SVC_JWT_SECRET": testJWTSecret,
		"SVC_DATA_DIR": t.TempDir(), "SVC_MIRROR_CHECK_INTERVAL": "200ms"})
	require.Eventually(t, func() bool { return call(t, cp.URL, "GET", "/readyz", "", nil).Status == http.StatusOK }, 30*time.Second, 50*time.Millisecond)
	token := call(t, cp.URL, "POST", "/api/v1/auth/signup", "", map[string]string{"email": "wipe@example.com", "password": "correct horse battery"}).str("token")
	p := call(t, cp.URL, "POST", "/api/v1/projects", token, map[string]string{"name": "kept"})
	require.Equal(t, http.StatusCreated, p.Status, "%s", p.Raw)

	_, js := testenv.Connect(t, n.URL())
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, "svc-projects")
	require.NoError(t, err)
	_, err = kv.Get(ctx, p.str("id"))
	require.NoError(t, err)

	require.NoError(t, js.DeleteKeyValue(ctx, "svc-projects"))
	require.Eventually(t, func() bool {
		kv, err := js.KeyValue(ctx, "svc-projects")
		if err != nil {
			return false
		}
		_, err = kv.Get(ctx, p.str("id"))
		return err == nil
	}, 20*time.Second, 50*time.Millisecond, "the project was not published again into the new bucket")
}
