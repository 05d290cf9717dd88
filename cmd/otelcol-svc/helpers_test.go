package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-svc/otelcol-svc/components/apikey"
	"github.com/otelcol-svc/otelcol-svc/components/mirror"
	"github.com/otelcol-svc/otelcol-svc/components/streams"
	"github.com/otelcol-svc/otelcol-svc/components/testenv"
)

// env is one collector in the receiver role against an in-process NATS.
type env struct {
	nats *testenv.NATS
	col  *testenv.Collector
	js   jetstream.JetStream
	m    *mirror.Store
}

func startReceiver(t *testing.T, extra map[string]string) *env {
	t.Helper()
	n := testenv.StartNATS(t)
	vars := map[string]string{"NATS_URL": n.URL(), "SVC_STREAM_REPLICAS": "1"}
	for k, v := range extra {
		vars[k] = v
	}
	col := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/receiver.yaml", Env: vars})
	_, js := testenv.Connect(t, n.URL())
	m, err := mirror.Open(context.Background(), js, 1)
	require.NoError(t, err)
	return &env{nats: n, col: col, js: js, m: m}
}

// project publishes a project and a project key into the mirror, as the control plane
// does, and waits until the receiver accepts the key.
func (e *env) project(t *testing.T, id string) string {
	t.Helper()
	key := apikey.Generate(apikey.KindProject)
	ctx := context.Background()
	require.NoError(t, e.m.PutProject(ctx, mirror.Project{ID: id, Version: 1, Members: map[string]int64{"user_1": 1}}))
	require.NoError(t, e.m.PutKey(ctx, apikey.Hash(key), mirror.KeyEntry{KeyID: "k-" + id, ProjectID: id, Scope: mirror.ScopeProject}))
	waitAccepted(t, e.col.HTTP, key)
	return key
}

// waitAccepted polls with an empty OTLP request (no records, nothing published) until the
// key is accepted.
func waitAccepted(t *testing.T, base, key string) {
	t.Helper()
	require.Eventually(t, func() bool {
		return post(t, base+"/v1/logs", key, "application/json", []byte(`{}`), nil).StatusCode == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond, "key never accepted")
}

type response struct {
	StatusCode int
	Header     http.Header
	Body       []byte
}

func post(t *testing.T, url, key, contentType string, body []byte, headers map[string]string) response {
	t.Helper()
	h := map[string]string{}
	if contentType != "" {
		h["Content-Type"] = contentType
	}
	if key != "" {
		h["X-API-Key"] = key
	}
	for k, v := range headers {
		h[k] = v
	}
	return send(t, http.MethodPost, url, body, h)
}

// send makes one request and reads the whole answer.
func send(t *testing.T, method, url string, body []byte, headers map[string]string) response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{StatusCode: resp.StatusCode, Header: resp.Header, Body: b}
}

// errorCode decodes the contract's error shape.
func errorCode(t *testing.T, r response) string {
	t.Helper()
	var b struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &b), "body %s", r.Body)
	require.NotEmpty(t, b.Error.Message)
	return b.Error.Code
}

// stored returns every message of a project's raw stream, oldest first; none when the
// stream does not exist.
func stored(t *testing.T, js jetstream.JetStream, project string) []*jetstream.RawStreamMsg {
	t.Helper()
	return streamMsgs(t, js, streams.RawStream(project))
}

// outputs returns every message of a project's output stream, oldest first.
func outputs(t *testing.T, js jetstream.JetStream, project string) []*jetstream.RawStreamMsg {
	t.Helper()
	return streamMsgs(t, js, streams.OutputStream(project))
}

func streamMsgs(t *testing.T, js jetstream.JetStream, name string) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, name)
	if err == jetstream.ErrStreamNotFound {
		return nil
	}
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err == jetstream.ErrMsgNotFound {
			continue
		}
		require.NoError(t, err)
		out = append(out, m)
	}
	return out
}

func decodeRecord(t *testing.T, b []byte) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	require.NoError(t, dec.Decode(&m), "record %s", b)
	return m
}

func pcommonTime(t time.Time) pcommon.Timestamp { return pcommon.NewTimestampFromTime(t) }

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
