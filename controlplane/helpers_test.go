package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/validationresponder"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// stack is a control plane with its NATS (and, when asked, a receiver on the same NATS).
type stack struct {
	nats *testenv.NATS
	cp   *testenv.ControlPlane
	db   map[string]string
}

// databases runs fn once per supported database.
func databases(t *testing.T, fn func(t *testing.T, db map[string]string)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, map[string]string{"SVC_DATA_DIR": t.TempDir()}) })
	t.Run("postgres", func(t *testing.T) {
		fn(t, map[string]string{"SVC_DATA_DIR": t.TempDir(), "DATABASE_URL": testenv.PostgresURL(t)})
	})
}

const testJWTSecret = "test-secret-test-secret-test-secret-0123"

func startStack(t *testing.T, db map[string]string) *stack {
	t.Helper()
	n := testenv.StartNATS(t)
	startValidator(t, n.URL())
	env := map[string]string{"NATS_URL": n.URL(), "SVC_JWT_SECRET": testJWTSecret}
	for k, v := range db {
		env[k] = v
	}
	return &stack{nats: n, cp: testenv.StartControlPlane(t, env), db: db}
}

// startValidator serves the data plane's pipeline checks (internal/validation) on a
// NATS from this process, with the code every collector runs: the control plane saves
// no pipeline while no collector answers.
func startValidator(t *testing.T, natsURL string) {
	t.Helper()
	nc, _ := testenv.Connect(t, natsURL)
	svc, err := validationresponder.Start(nc)
	require.NoError(t, err)
	t.Cleanup(func() { _ = svc.Stop() })
	// Once the server has the subscription, the next check finds the responder.
	require.NoError(t, nc.Flush())
}

// receiver starts the ingest role on the stack's NATS.
func (s *stack) receiver(t *testing.T) *testenv.Collector {
	t.Helper()
	return testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/receiver.yaml",
		Env: map[string]string{"NATS_URL": s.nats.URL(), "SVC_STREAM_REPLICAS": "1"}})
}

type reply struct {
	Status int
	Header http.Header
	Body   map[string]any
	Raw    []byte
}

func (r reply) str(k string) string { s, _ := r.Body[k].(string); return s }

func (r reply) code() string {
	e, _ := r.Body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func (r reply) message() string {
	e, _ := r.Body["error"].(map[string]any)
	m, _ := e["message"].(string)
	return m
}

func call(t *testing.T, base, method, path, token string, body any) reply {
	t.Helper()
	return callWith(t, http.DefaultClient, base, method, path, token, body)
}

// callWith is call through the given client (e.g. one with another source address).
func callWith(t *testing.T, client *http.Client, base, method, path, token string, body any) reply {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path, rd)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{Status: resp.StatusCode, Header: resp.Header, Raw: raw}
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &r.Body)
	}
	return r
}

// signup creates an account and returns its token and id.
func (s *stack) signup(t *testing.T, email string) (token, id string) {
	t.Helper()
	r := call(t, s.cp.URL, "POST", "/api/v1/auth/signup", "", map[string]string{"email": email, "password": "correct horse battery"})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Raw)
	return r.str("token"), r.Body["user"].(map[string]any)["id"].(string)
}
