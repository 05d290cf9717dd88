package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/validationresponder"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/internal/validation"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// heldChecks answers the control plane's pipeline checks with the data plane's real
// responder, which runs on a NATS of its own (with JetStream, so its answers carry the
// warnings of the project's records), and can hold one check until released: a data
// plane slow to answer, as reading records for warnings can make it (up to
// validation.Timeout).
type heldChecks struct {
	hold    atomic.Bool
	held    chan struct{}
	release chan struct{}
	records *testenv.NATS
}

func startHeldChecks(t *testing.T, natsURL string) *heldChecks {
	t.Helper()
	h := &heldChecks{held: make(chan struct{}, 1), release: make(chan struct{}), records: testenv.StartNATS(t)}
	nc2, js2 := testenv.Connect(t, h.records.URL())
	svc, err := validationresponder.Start(nc2, validationresponder.WithJetStream(js2))
	require.NoError(t, err)
	t.Cleanup(func() { _ = svc.Stop() })
	require.NoError(t, nc2.Flush())

	nc, _ := testenv.Connect(t, natsURL)
	_, err = nc.Subscribe(validation.Subject, func(m *nats.Msg) {
		// Each check on its own goroutine: a held one must not hold the others.
		go func() {
			if h.hold.CompareAndSwap(true, false) {
				h.held <- struct{}{}
				select {
				case <-h.release:
				case <-time.After(5 * time.Second):
				}
			}
			fwd := nats.NewMsg(validation.Subject)
			fwd.Header, fwd.Data = m.Header, m.Data
			ans, err := nc2.RequestMsg(fwd, validation.Timeout)
			if err != nil {
				return // the control plane answers 503, which the test shows
			}
			out := nats.NewMsg(m.Reply)
			out.Header, out.Data = ans.Header, ans.Data
			_ = m.RespondMsg(out)
		}()
	})
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	return h
}

// storeRecords gives project pid records on the responder's NATS, for its warnings.
func (h *heldChecks) storeRecords(t *testing.T, pid string) {
	t.Helper()
	_, js := testenv.Connect(t, h.records.URL())
	ctx := context.Background()
	require.NoError(t, streams.Create(ctx, js, streams.RawConfig(pid, streams.DefaultLimits())))
	for i := range 3 {
		_, err := js.Publish(ctx, streams.RawSubject(pid), fmt.Appendf(nil, `{"severityNumber": %d, "service": "checkout"}`, 17+i))
		require.NoError(t, err)
	}
}

// async runs an API call on its own goroutine; its answer arrives on the channel (a
// transport failure as status 0 with the error in Raw: require may not run off the
// test's goroutine).
func async(cp, method, path, token string, body any) <-chan reply {
	ch := make(chan reply, 1)
	go func() {
		b, _ := json.Marshal(body)
		var r reply
		req, err := http.NewRequest(method, cp+path, bytes.NewReader(b))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+token)
			var resp *http.Response
			if resp, err = (&http.Client{Timeout: 10 * time.Second}).Do(req); err == nil {
				r.Status, r.Header = resp.StatusCode, resp.Header
				r.Raw, err = io.ReadAll(resp.Body)
				resp.Body.Close()
				_ = json.Unmarshal(r.Raw, &r.Body)
			}
		}
		if err != nil {
			r.Raw = []byte(err.Error())
		}
		ch <- r
	}()
	return ch
}

func within(t *testing.T, ch <-chan reply, d time.Duration, what string) reply {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		require.FailNow(t, what+": no answer within "+d.String())
		return reply{}
	}
}

// A PATCH of the pipeline waits for the data plane's check (up to 2 s: it reads the
// project's records for warnings). That wait must not hold the database: other
// projects' writes, and other writes to this project, go on meanwhile. The PATCH then
// stores what was checked only if nobody saved the pipeline in between; otherwise it is
// refused (409 pipeline_changed) instead of silently overwriting that save.
func TestPipelinePatchCheckHoldsNoTransaction(t *testing.T) {
	databases(t, func(t *testing.T, db map[string]string) {
		n := testenv.StartNATS(t)
		h := startHeldChecks(t, n.URL())
		env := map[string]string{"NATS_URL": n.URL(), "SVC_JWT_SECRET": testJWTSecret}
		for k, v := range db {
			env[k] = v
		}
		s := &stack{nats: n, cp: testenv.StartControlPlane(t, env), db: db}
		cp := s.cp.URL
		owner, _ := s.signup(t, "patch-owner@example.com")
		other, _ := s.signup(t, "patch-other@example.com")
		pid := call(t, cp, "POST", "/api/v1/projects", owner, map[string]string{"name": "checkout"}).str("id")
		require.NotEmpty(t, pid)
		otherPid := call(t, cp, "POST", "/api/v1/projects", other, map[string]string{"name": "billing"}).str("id")
		require.NotEmpty(t, otherPid)
		h.storeRecords(t, pid)
		p := "/api/v1/projects/" + pid

		// 1. While the check is held, another tenant renames its project and the owner
		// creates a key in this one; both answer while the check still waits.
		h.hold.Store(true)
		patch := async(cp, "PATCH", p+"/pipeline", owner, map[string]any{"trigger": "severty_number >= 17"})
		<-h.held
		rename := async(cp, "PATCH", "/api/v1/projects/"+otherPid, other, map[string]string{"name": "billing-eu"})
		r := within(t, rename, time.Second, "another project's rename while a pipeline check is in flight")
		assert.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		key := async(cp, "POST", p+"/keys", owner, map[string]string{"name": "during-check"})
		r = within(t, key, time.Second, "a key created in the project while its pipeline check is in flight")
		assert.Equal(t, http.StatusCreated, r.Status, "%s", r.Raw)
		close(h.release)
		// The key changed the project, not its pipeline: the PATCH is saved, with the
		// check's warning about the misspelt field.
		r = within(t, patch, 10*time.Second, "the PATCH once its check answers")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		assert.Equal(t, "severty_number >= 17", r.str("trigger"))
		ws := warningsOf(t, r)
		require.NotEmpty(t, ws, "the PATCH's answer keeps the check's warnings: %s", r.Raw)
		assert.Equal(t, "trigger", ws[0]["field"], "%s", r.Raw)
		assert.Contains(t, fmt.Sprint(ws[0]["message"]), "severty_number", "%s", r.Raw)

		// 2. A save made while a PATCH's check is held wins; the PATCH, checked against
		// the pipeline before that save, is refused and changes nothing.
		h.release = make(chan struct{})
		h.hold.Store(true)
		stale := async(cp, "PATCH", p+"/pipeline", owner, map[string]any{"batch_size": 7})
		<-h.held
		save := async(cp, "PATCH", p+"/pipeline", owner, map[string]any{"trigger": "severity_number >= 17"})
		r = within(t, save, time.Second, "a pipeline save while another PATCH's check is in flight")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		close(h.release)
		r = within(t, stale, 10*time.Second, "the held PATCH once its check answers")
		assert.Equal(t, http.StatusConflict, r.Status, "%s", r.Raw)
		assert.Equal(t, "pipeline_changed", r.code(), "%s", r.Raw)
		assert.Contains(t, r.message(), "reload")

		got := call(t, cp, "GET", p+"/pipeline", owner, nil)
		require.Equal(t, http.StatusOK, got.Status, "%s", got.Raw)
		assert.Equal(t, "severity_number >= 17", got.str("trigger"), "the save made during the check is kept")
		assert.NotEqual(t, float64(7), got.Body["batch_size"], "the refused PATCH stored nothing")

		// 3. The MCP tool set_pipeline is the same change: refused alike, with the code
		// for the agent to read, when a PUT saves the pipeline during its check.
		cs, err := mcpSession(t, cp, owner)
		require.NoError(t, err)
		h.release = make(chan struct{})
		h.hold.Store(true)
		type toolAnswer struct {
			res *mcp.CallToolResult
			err error
		}
		viaMCP := make(chan toolAnswer, 1)
		go func() {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "set_pipeline",
				Arguments: map[string]any{"project_id": pid, "batch_size": 9}})
			viaMCP <- toolAnswer{res, err}
		}()
		<-h.held
		r = within(t, async(cp, "PUT", p+"/pipeline", owner, map[string]any{"trigger": "severity_number >= 21"}), time.Second,
			"a PUT while set_pipeline's check is in flight")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Raw)
		close(h.release)
		var a toolAnswer
		select {
		case a = <-viaMCP:
		case <-time.After(10 * time.Second):
			require.FailNow(t, "set_pipeline did not answer")
		}
		require.NoError(t, a.err)
		require.True(t, a.res.IsError, "set_pipeline is refused")
		require.NotEmpty(t, a.res.Content)
		text, _ := a.res.Content[0].(*mcp.TextContent)
		require.NotNil(t, text)
		assert.Contains(t, text.Text, "pipeline_changed")
		got = call(t, cp, "GET", p+"/pipeline", owner, nil)
		assert.Equal(t, "severity_number >= 21", got.str("trigger"))
		assert.NotEqual(t, float64(9), got.Body["batch_size"], "the refused set_pipeline stored nothing")
	})
}
