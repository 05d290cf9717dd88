package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
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
	maps.Copy(vars, extra)
	col := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/receiver.yaml", Env: vars})
	js, m := connectMirror(t, n.URL())
	return &env{nats: n, col: col, js: js, m: m}
}

// connectMirror connects to NATS and opens the configuration mirror there, to publish
// projects and keys as the control plane does.
func connectMirror(t *testing.T, natsURL string) (jetstream.JetStream, *mirror.Store) {
	t.Helper()
	_, js := testenv.Connect(t, natsURL)
	m, err := mirror.Open(context.Background(), js, 1)
	require.NoError(t, err)
	return js, m
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

// pipelineSettled waits until the pipeline has settled every record stored so far on the
// project's raw stream. Its durable consumer acks a message only once the record was
// dropped by the trigger, delivered to the agent (answered 2xx) or dead-lettered (the
// jetstream receiver's README), so an ack floor at the stream's last message is the
// positive marker that every agent call those records cause has been made and answered:
// a test can then assert that nothing else came, without sleeping and hoping.
func pipelineSettled(t *testing.T, js jetstream.JetStream, project string) {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, streams.RawStream(project))
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	last := info.State.LastSeq
	require.Eventually(t, func() bool {
		c, err := s.Consumer(ctx, pipelineDurable)
		if err != nil {
			return false
		}
		ci, err := c.Info(ctx)
		if err != nil {
			return false
		}
		return ci.AckFloor.Stream >= last
	}, 30*time.Second, 20*time.Millisecond, "the pipeline never settled project %s's records up to message %d", project, last)
}

// pipelineDurable is the pipeline's consumer on every raw stream (durable in the shipped
// configs' jetstream/raw receiver).
const pipelineDurable = "svc-pipeline"

// api calls the control plane's JSON API and decodes the answer.
func api(t *testing.T, method, url, token string, body any) (int, map[string]any) {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	h := map[string]string{"Content-Type": "application/json"}
	if token != "" {
		h["Authorization"] = "Bearer " + token
	}
	r := send(t, method, url, b, h)
	var out map[string]any
	_ = json.Unmarshal(r.Body, &out)
	return r.StatusCode, out
}

// apiProject is a project set up through the control plane's API, as a user would: the
// session token, the project's id, an API key, and the pipeline as saved (with its
// signing secret).
type apiProject struct {
	Token, ID, Key string
	Pipeline       map[string]any
}

// setUpThroughAPI signs up, creates a project and an API key, saves the pipeline and adds
// one destination (sink).
func setUpThroughAPI(t *testing.T, cpURL, name string, pipeline, sink map[string]any) apiProject {
	t.Helper()
	status, signup := api(t, "POST", cpURL+"/api/v1/auth/signup", "", map[string]string{"email": "ops@example.com", "password": "correct horse battery staple"})
	require.Equal(t, http.StatusCreated, status, "%v", signup)
	p := apiProject{Token: signup["token"].(string)}
	status, project := api(t, "POST", cpURL+"/api/v1/projects", p.Token, map[string]string{"name": name})
	require.Equal(t, http.StatusCreated, status, "%v", project)
	p.ID = project["id"].(string)
	base := cpURL + "/api/v1/projects/" + p.ID
	// The tests read the console with the key too, which needs the read scope.
	status, key := api(t, "POST", base+"/keys", p.Token, map[string]any{"name": name, "scopes": []string{"ingest", "results", "read"}})
	require.Equal(t, http.StatusCreated, status, "%v", key)
	p.Key = key["key"].(string)
	status, p.Pipeline = api(t, "PUT", base+"/pipeline", p.Token, pipeline)
	require.Equal(t, http.StatusOK, status, "%v", p.Pipeline)
	status, saved := api(t, "POST", base+"/sinks", p.Token, sink)
	require.Equal(t, http.StatusCreated, status, "%v", saved)
	return p
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
