package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinecfg"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

type dryRunResult struct {
	Mode        string   `json:"mode"`
	Evaluated   int      `json:"evaluated"`
	Matched     int      `json:"matched"`
	MatchedSeqs []uint64 `json:"matched_seqs"`
	Records     []struct {
		Seq         uint64          `json:"seq"`
		Time        string          `json:"time"`
		Signal      string          `json:"signal"`
		SourceID    string          `json:"source_id"`
		Record      json.RawMessage `json:"record"`
		Transformed json.RawMessage `json:"transformed"`
	} `json:"records"`
	RecordsLeftOut int               `json:"records_left_out"`
	Calls          []json.RawMessage `json:"calls"`
	Errors         []dryRunError     `json:"errors"`
}

func postJSON(t *testing.T, url, body string, headers map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

func dryRunURL(base, project string) string {
	return base + "/console/v1/projects/" + project + "/pipeline/dry-run"
}

func (c *consoleStack) dryRun(t *testing.T, project, body string) dryRunResult {
	t.Helper()
	a := postJSON(t, dryRunURL(c.url, project), body, map[string]string{"X-API-Key": "key-" + project})
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	var r dryRunResult
	require.NoError(t, json.Unmarshal(a.body, &r), "%s", a.body)
	return r
}

// matches lists an answer's records as "seq: stored => transformed".
func matches(r dryRunResult) []string {
	out := make([]string, 0, len(r.Records))
	for _, m := range r.Records {
		out = append(out, fmt.Sprintf("%d: %s => %s", m.Seq, m.Record, m.Transformed))
	}
	return out
}

// answerMatches is matches for an answer evaluated without HTTP.
func answerMatches(a *dryRunAnswer) []string {
	out := make([]string, 0, len(a.Records))
	for _, m := range a.Records {
		out = append(out, fmt.Sprintf("%d: %s => %s", m.Seq, m.Record, m.Transformed))
	}
	return out
}

func calls(r dryRunResult) []string {
	out := make([]string, 0, len(r.Calls))
	for _, c := range r.Calls {
		out = append(out, string(c))
	}
	return out
}

// Legacy mode: the trigger picks records, the transforms change them, and the agent's
// bodies are arrays of batch_size, oldest first; untouched records keep their bytes.
func TestDryRunLegacyBatchesTransformedMatches(t *testing.T) {
	c := startConsole(t)
	levels := []string{"error", "info", "error", "error", "info", "error", "error"}
	c.fill(t, "p1", len(levels), func(i int) string { return fmt.Sprintf(`{"n":%d,"level":%q}`, i, levels[i]) }, noSource)

	r := c.dryRun(t, "p1", `{"pipeline": {"trigger": "event[\"level\"] == \"error\"",
		"transforms": ["set(event[\"seen\"], true) where event[\"n\"] < 3"], "batch_size": 2}}`)
	assert.Equal(t, "legacy", r.Mode)
	assert.Equal(t, 7, r.Evaluated)
	assert.Equal(t, 5, r.Matched)
	assert.Equal(t, []uint64{1, 3, 4, 6, 7}, r.MatchedSeqs)
	assert.Equal(t, []string{
		`[{"n":0,"level":"error","seen":true},{"n":2,"level":"error","seen":true}]`,
		`[{"n":3,"level":"error"},{"n":5,"level":"error"}]`,
		`[{"n":6,"level":"error"}]`,
	}, calls(r))
	assert.Empty(t, r.Errors)
	// Every match is in the answer, as stored and as the agent would get it.
	assert.Equal(t, []string{
		`1: {"n":0,"level":"error"} => {"n":0,"level":"error","seen":true}`,
		`3: {"n":2,"level":"error"} => {"n":2,"level":"error","seen":true}`,
		`4: {"n":3,"level":"error"} => {"n":3,"level":"error"}`,
		`6: {"n":5,"level":"error"} => {"n":5,"level":"error"}`,
		`7: {"n":6,"level":"error"} => {"n":6,"level":"error"}`,
	}, matches(r))
	require.NotEmpty(t, r.Records)
	assert.Equal(t, "event", r.Records[0].Signal)
	stored, err := time.Parse(time.RFC3339Nano, r.Records[0].Time)
	require.NoError(t, err, "the stored time, as the events view gives it")
	assert.WithinDuration(t, time.Now(), stored, time.Hour)
	assert.Zero(t, r.RecordsLeftOut)

	// limit takes the newest records only.
	r = c.dryRun(t, "p1", `{"pipeline": {"trigger": "event[\"level\"] == \"error\"", "batch_size": 10}, "limit": 3}`)
	assert.Equal(t, 3, r.Evaluated)
	assert.Equal(t, []string{`[{"n":5,"level":"error"},{"n":6,"level":"error"}]`}, calls(r))
	assert.Equal(t, []string{`6: {"n":5,"level":"error"} => {"n":5,"level":"error"}`, `7: {"n":6,"level":"error"} => {"n":6,"level":"error"}`}, matches(r))

	// Nothing matched: no records, an empty list rather than none.
	r = c.dryRun(t, "p1", `{"pipeline": {"trigger": "event[\"level\"] == \"fatal\""}}`)
	assert.Zero(t, r.Matched)
	assert.NotNil(t, r.Records)
	assert.Empty(t, r.Records)
}

// A record the trigger or a transform fails on is listed with its sequence, and left
// out of the calls as the pipeline drops it.
func TestDryRunListsEvaluationErrors(t *testing.T) {
	c := startConsole(t)
	bodies := []string{`{"body":"{\"ok\":1}"}`, `{"body":"not json"}`}
	c.fill(t, "p1", len(bodies), func(i int) string { return bodies[i] }, noSource)
	r := c.dryRun(t, "p1", `{"pipeline": {"trigger": "ParseJSON(body)[\"ok\"] == 1"}}`)
	assert.Equal(t, 2, r.Evaluated)
	assert.Equal(t, []string{`[{"body":"{\"ok\":1}"}]`}, calls(r))
	assert.Equal(t, []string{`1: {"body":"{\"ok\":1}"} => {"body":"{\"ok\":1}"}`}, matches(r), "a failed record is not a match")
	require.Len(t, r.Errors, 1)
	assert.Equal(t, uint64(2), r.Errors[0].Seq)
	assert.True(t, strings.HasPrefix(r.Errors[0].Message, "trigger: "), r.Errors[0].Message)
}

// Window mode: each trigger's body holds the earlier records of its group that passed
// the context filter, transformed, oldest first, and never the trigger itself.
func TestDryRunWindowCallsWithTheirWindows(t *testing.T) {
	c := startConsole(t)
	recs := []string{
		`{"g":"a","n":1,"debug":"x"}`, `{"g":"b","n":2}`, `{"g":"a","n":3,"noise":true}`, `{"g":"a","n":4}`,
		`{"g":"a","n":5,"alert":true}`, `{"g":"b","n":6,"alert":true}`,
	}
	c.fill(t, "p1", len(recs), func(i int) string { return recs[i] }, noSource)
	r := c.dryRun(t, "p1", `{"pipeline": {"window_enabled": true, "trigger": "event[\"alert\"] == true",
		"context_filter": "event[\"noise\"] == nil", "group_key": "event[\"g\"]",
		"transforms": ["delete_key(event, \"debug\")"]}}`)
	assert.Equal(t, "window", r.Mode)
	assert.Equal(t, 6, r.Evaluated)
	assert.Equal(t, 2, r.Matched)
	assert.Equal(t, []uint64{5, 6}, r.MatchedSeqs)
	assert.Equal(t, []string{
		`{"trigger":{"g":"a","n":5,"alert":true},"window":[{"g":"a","n":1},{"g":"a","n":4}]}`,
		`{"trigger":{"g":"b","n":6,"alert":true},"window":[{"g":"b","n":2}]}`,
	}, calls(r))
	assert.Equal(t, []string{
		`5: {"g":"a","n":5,"alert":true} => {"g":"a","n":5,"alert":true}`,
		`6: {"g":"b","n":6,"alert":true} => {"g":"b","n":6,"alert":true}`,
	}, matches(r), "the triggers, not their windows")

	// The window budget applies as in the pipeline: the newest records are kept. With
	// limit 5 the oldest record is not read, so not in any window.
	r = c.dryRun(t, "p1", `{"pipeline": {"window_enabled": true, "trigger": "event[\"alert\"] == true",
		"group_key": "event[\"g\"]", "window_max_events": 1}, "limit": 5}`)
	assert.Equal(t, []string{
		`{"trigger":{"g":"a","n":5,"alert":true},"window":[{"g":"a","n":4}],"window_truncated":1}`,
		`{"trigger":{"g":"b","n":6,"alert":true},"window":[{"g":"b","n":2}]}`,
	}, calls(r))

	// Transforms run before the group key, as in the pipeline.
	r = c.dryRun(t, "p1", `{"pipeline": {"window_enabled": true, "trigger": "event[\"n\"] == 5",
		"group_key": "event[\"g\"]", "transforms": ["delete_key(event, \"g\")"]}, "limit": 3}`)
	assert.Equal(t, []string{`{"trigger":{"alert":true,"n":5},"window":[{"n":4}]}`}, calls(r))
	assert.Equal(t, []string{`5: {"g":"a","n":5,"alert":true} => {"alert":true,"n":5}`}, matches(r), "the trigger as sent")
}

// The window holds only records within window_duration of the trigger (by the time
// they were stored), evaluated without a stream so the times can be chosen.
func TestDryRunWindowDuration(t *testing.T) {
	comp, err := pipelinecfg.Compile(mirror.Pipeline{WindowEnabled: true, WindowDurationSeconds: 60, Trigger: `event["alert"] == true`})
	require.NoError(t, err)
	base := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	recs := []storedRecord{
		{seq: 1, time: base, signal: "event", data: []byte(`{"n":1}`)},
		{seq: 2, time: base.Add(30 * time.Second), signal: "event", data: []byte(`{"n":2}`)},
		{seq: 3, time: base.Add(70 * time.Second), signal: "event", data: []byte(`{"n":3,"alert":true}`)},
		{seq: 4, time: base.Add(200 * time.Second), signal: "event", data: []byte(`{"n":4,"alert":true}`)},
	}
	ans := evaluate(context.Background(), comp, recs, dryRunLimits{evalTime: time.Minute, callBytes: 1 << 20, recordBytes: 1 << 20, errors: 10})
	require.Len(t, ans.Calls, 2)
	assert.Equal(t, `{"trigger":{"n":3,"alert":true},"window":[{"n":2}]}`, string(ans.Calls[0]))
	assert.Equal(t, `{"trigger":{"n":4,"alert":true},"window":[]}`, string(ans.Calls[1]))

	// The answer's byte budget leaves out later calls, counted.
	ans = evaluate(context.Background(), comp, recs, dryRunLimits{evalTime: time.Minute, callBytes: 60, recordBytes: 1 << 20, errors: 10})
	assert.Len(t, ans.Calls, 1)
	assert.Equal(t, 1, ans.CallsLeftOut)
	assert.Equal(t, 2, ans.Matched)
	assert.Len(t, ans.Records, 2, "the records have a budget of their own")

	// So do the records: those beyond it are counted, the first ones listed with their times.
	ans = evaluate(context.Background(), comp, recs, dryRunLimits{evalTime: time.Minute, callBytes: 1 << 20, recordBytes: 60, errors: 10})
	assert.Equal(t, []string{`3: {"n":3,"alert":true} => {"n":3,"alert":true}`}, answerMatches(ans))
	assert.Equal(t, "2026-01-01T12:01:10Z", ans.Records[0].Time)
	assert.Equal(t, 1, ans.RecordsLeftOut)
	assert.Len(t, ans.Calls, 2)
	assert.Equal(t, []uint64{3, 4}, ans.MatchedSeqs, "every match is still named")

	// Past the time limit the answer says so.
	ans = evaluate(context.Background(), comp, recs, dryRunLimits{evalTime: -time.Second, callBytes: 1 << 20, recordBytes: 1 << 20, errors: 10})
	assert.True(t, ans.TimedOut)
	assert.Zero(t, ans.Evaluated)
}

// fillRaw stores records on a project's raw stream as the receiver does.
func fillRaw(t *testing.T, js jetstream.JetStream, project string, recs ...string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, streams.Ensure(ctx, js, streams.RawConfig(project, streams.DefaultLimits())))
	for _, rec := range recs {
		_, err := js.PublishMsg(ctx, &nats.Msg{Subject: streams.RawSubject(project), Data: []byte(rec),
			Header: nats.Header{streams.HeaderSignal: []string{"event"}}})
		require.NoError(t, err)
	}
}

// storage is what a dry run must leave as it was: every stream and its messages.
func storage(t *testing.T, js jetstream.JetStream) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	l := js.ListStreams(context.Background())
	for info := range l.Info() {
		// Authentication notes when a key was last used, on any request.
		if info.Config.Name != "KV_svc-key-usage" {
			out[info.Config.Name] = info.State.LastSeq
		}
	}
	require.NoError(t, l.Err())
	return out
}

func (s *logStack) dryRun(t *testing.T, project, body string, headers map[string]string) answer {
	t.Helper()
	return postJSON(t, dryRunURL(s.url, project), body, headers)
}

// A dry run sends and stores nothing: no stream gains a message (no output, no delivery,
// no ledger entry), none is created, and the raw stream keeps no consumer of it. Any
// member may run one (it shows what their reads show); another tenant cannot.
func TestDryRunStoresNothingAndStaysInTheProject(t *testing.T) {
	s := startLogStack(t)
	fillRaw(t, s.js, projA, `{"kind":"alert","n":1}`, `{"kind":"ok","n":2}`)
	fillRaw(t, s.js, projB, `{"kind":"alert","secret":"b"}`)
	before := storage(t, s.js)
	pipeline := `{"pipeline": {"trigger": "event[\"kind\"] == \"alert\"", "agent_endpoint_url": "http://127.0.0.1:1/agent"}}`

	for _, who := range []map[string]string{s.key(projA), s.token(t, "member", projA), s.token(t, "owner", projA)} {
		a := s.dryRun(t, projA, pipeline, who)
		require.Equal(t, http.StatusOK, a.status, "%s", a.body)
		var r dryRunResult
		require.NoError(t, json.Unmarshal(a.body, &r))
		assert.Equal(t, []string{`[{"kind":"alert","n":1}]`}, calls(r))
		assert.Equal(t, []string{`1: {"kind":"alert","n":1} => {"kind":"alert","n":1}`}, matches(r), "project A's records only")
	}
	// Window mode too: its window store is the dry run's memory.
	a := s.dryRun(t, projA, `{"pipeline": {"window_enabled": true, "trigger": "event[\"kind\"] == \"ok\"", "cooldown_seconds": 60}}`, s.key(projA))
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	assert.Contains(t, string(a.body), `{"trigger":{"kind":"ok","n":2},"window":[{"kind":"alert","n":1}]}`)

	// The audit stream is the one written: it records who read A's records (audit.go).
	after := storage(t, s.js)
	delete(after, streams.AuditStream)
	assert.Equal(t, before, after, "no stream created or written")
	raw, err := s.js.Stream(context.Background(), streams.RawStream(projA))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := raw.Info(context.Background())
		return err == nil && info.State.Consumers == 0
	}, 5*time.Second, 20*time.Millisecond, "the read's consumers are gone")

	// Project B's credentials do not open A, and A's do not open B.
	for _, who := range []map[string]string{s.key(projB), s.token(t, "owner_b", projA)} {
		a := s.dryRun(t, projA, pipeline, who)
		assert.Equal(t, http.StatusNotFound, a.status, "%s", a.body)
		assert.NotContains(t, string(a.body), "alert")
	}
	a = s.dryRun(t, projB, pipeline, s.key(projA))
	assert.Equal(t, http.StatusNotFound, a.status, "%s", a.body)
	assert.NotContains(t, string(a.body), "secret")
	a = s.dryRun(t, projA, pipeline, nil)
	assert.Equal(t, http.StatusUnauthorized, a.status, "%s", a.body)
}

// A pipeline that does not compile is the control plane's 400 invalid_pipeline, with the
// field, the statement and the position the dashboard places the error at.
func TestDryRunRefusesAnInvalidPipelineWithItsPosition(t *testing.T) {
	c := startConsole(t)
	key := map[string]string{"X-API-Key": "key-p1"}
	url := dryRunURL(c.url, "p1")

	a := postJSON(t, url, `{"pipeline": {"trigger": "severity_number >= "}}`, key)
	require.Equal(t, http.StatusBadRequest, a.status, "%s", a.body)
	var e struct {
		Error struct {
			Code     string `json:"code"`
			Message  string `json:"message"`
			Field    string `json:"field"`
			Index    *int   `json:"index"`
			Position *struct {
				Line   int `json:"line"`
				Column int `json:"column"`
			} `json:"position"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(a.body, &e), "%s", a.body)
	assert.Equal(t, "invalid_pipeline", e.Error.Code)
	assert.Equal(t, "trigger", e.Error.Field)
	assert.True(t, strings.HasPrefix(e.Error.Message, "trigger: "), e.Error.Message)
	assert.Nil(t, e.Error.Index)
	require.NotNil(t, e.Error.Position, "%s", a.body)
	assert.Equal(t, 1, e.Error.Position.Line)
	assert.Equal(t, 20, e.Error.Position.Column, "%s", a.body)

	a = postJSON(t, url, `{"pipeline": {"transforms": ["set(event[\"a\"], 1)", "set(nope(), 1)"]}}`, key)
	require.Equal(t, http.StatusBadRequest, a.status, "%s", a.body)
	require.NoError(t, json.Unmarshal(a.body, &e))
	assert.Equal(t, "transforms", e.Error.Field)
	require.NotNil(t, e.Error.Index, "%s", a.body)
	assert.Equal(t, 1, *e.Error.Index)

	a = postJSON(t, url, `{"pipeline": {"batch_size": 5000}}`, key)
	require.Equal(t, http.StatusBadRequest, a.status, "%s", a.body)
	require.NoError(t, json.Unmarshal(a.body, &e))
	assert.Equal(t, "batch_size", e.Error.Field)
}

func TestDryRunRefusesBadBodies(t *testing.T) {
	c := startConsole(t)
	key := map[string]string{"X-API-Key": "key-p1"}
	url := dryRunURL(c.url, "p1")
	for body, code := range map[string]string{
		``:                                 "invalid_json",
		`[]`:                               "invalid_body",
		`{"pipeline": {}} {}`:              "invalid_json",
		`{"pipeline": {"trigger": 1}}`:     "invalid_body",
		`{"pipeline": {"triger": ""}}`:     "invalid_body",
		`{"pipeline": {}, "extra": 1}`:     "invalid_body",
		`{"limit": 5}`:                     "invalid_body",
		`{"pipeline": {}, "limit": 0}`:     "invalid_body",
		`{"pipeline": {}, "limit": 1001}`:  "invalid_body",
		`{"pipeline": null}`:               "invalid_body",
		`{"pipeline": {}, "limit": "ten"}`: "invalid_body",
	} {
		a := postJSON(t, url, body, key)
		assert.Equal(t, http.StatusBadRequest, a.status, "%q: %s", body, a.body)
		assert.Equal(t, code, a.code(t), "%q", body)
	}
	a := postJSON(t, url, `{"pipeline": {"trigger": "`+strings.Repeat("a", maxDryRunBody)+`"}}`, key)
	assert.Equal(t, http.StatusRequestEntityTooLarge, a.status, "%s", a.body)
	assert.Equal(t, "payload_too_large", a.code(t))
	a = do(t, http.MethodGet, url, key)
	assert.Equal(t, http.StatusMethodNotAllowed, a.status)
	assert.Equal(t, "POST, OPTIONS", a.header.Get("Allow"))

	// A project with no records yet evaluates nothing.
	r := c.dryRun(t, "p1", `{"pipeline": {}}`)
	assert.Zero(t, r.Evaluated)
	assert.Empty(t, r.Calls)
}

// The body is outside input: whatever it holds, the parser answers without panicking,
// and what it accepts is a pipeline and a limit within bounds.
func FuzzParseDryRun(f *testing.F) {
	f.Add([]byte(`{"pipeline": {"trigger": "body == \"x\"", "batch_size": 2}, "limit": 10}`))
	f.Add([]byte(`{"pipeline": {"window_enabled": true, "group_key": "traceId"}}`))
	f.Add([]byte(`{"pipeline": {"mode": "incident", "fingerprint": "event["svc"]", "resolve_when": "body == "ok"", "group_wait": "0s", "reopen_within": "1h"}}`))
	f.Add([]byte(`{"pipeline": null, "limit": -1}`))
	f.Add([]byte(`{"pipeline": {"transforms": [1]}} x`))
	f.Fuzz(func(t *testing.T, body []byte) {
		_, limit, e := parseDryRun(body)
		if e != nil {
			if e.Status != http.StatusBadRequest || (e.Code != "invalid_json" && e.Code != "invalid_body") {
				t.Fatalf("refusal %d %s", e.Status, e.Code)
			}
			return
		}
		if limit < 1 || limit > maxDryRunLimit {
			t.Fatalf("limit %d accepted", limit)
		}
	})
}

// A pipeline without trigger and transforms sends records undecoded, as the pipeline
// does; one that is not JSON is shown as a string so the answer stays JSON. Errors are
// listed up to their bound and counted beyond.
func TestDryRunEvaluateEdges(t *testing.T) {
	all, err := pipelinecfg.Compile(mirror.Pipeline{BatchSize: 2})
	require.NoError(t, err)
	recs := []storedRecord{
		{seq: 1, signal: "event", data: []byte(`{"a":1}`)},
		{seq: 2, signal: "event", data: []byte(`not json`)},
		{seq: 3, signal: "event", data: []byte(`{"b":2}`)},
	}
	lim := dryRunLimits{evalTime: time.Minute, callBytes: 1 << 20, recordBytes: 1 << 20, errors: 1}
	ans := evaluate(context.Background(), all, recs, lim)
	require.Len(t, ans.Calls, 2, "a call per batch of 2")
	assert.Equal(t, `"[{\"a\":1},not json]"`, string(ans.Calls[0]))
	assert.Equal(t, `[{"b":2}]`, string(ans.Calls[1]))
	assert.Equal(t, []string{`1: {"a":1} => {"a":1}`, `2: "not json" => "not json"`, `3: {"b":2} => {"b":2}`}, answerMatches(ans))

	some, err := pipelinecfg.Compile(mirror.Pipeline{Trigger: `event["a"] == 1`})
	require.NoError(t, err)
	recs = append(recs, storedRecord{seq: 4, signal: "event", data: []byte(`[1]`)})
	ans = evaluate(context.Background(), some, recs, lim)
	assert.Equal(t, []uint64{1}, ans.MatchedSeqs)
	require.Len(t, ans.Errors, 1)
	assert.Equal(t, uint64(2), ans.Errors[0].Seq)
	assert.Equal(t, 1, ans.ErrorsLeftOut)
}
