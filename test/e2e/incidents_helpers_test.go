package e2e

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// The incidents as the console reads them (docs/incidents.md, docs/contract.md#section-11).
type incidentSummary struct {
	ID             string `json:"id"`
	Fingerprint    string `json:"fingerprint"`
	Title          string `json:"title"`
	Status         string `json:"status"`
	OpenedAt       string `json:"opened_at"`
	UpdatedAt      string `json:"updated_at"`
	ResolvedAt     string `json:"resolved_at"`
	Events         int64  `json:"events"`
	Calls          int64  `json:"calls"`
	AcknowledgedBy string `json:"acknowledged_by"`
	MutedUntil     string `json:"muted_until"`
	LastResult     string `json:"last_result"`
	Counts         struct {
		Events    int64 `json:"events"`
		NewEvents int64 `json:"new_events"`
		Calls     int64 `json:"calls"`
	} `json:"counts"`
}

type incidentDetail struct {
	incidentSummary
	Timeline []struct {
		At        string `json:"at"`
		Type      string `json:"type"`
		By        string `json:"by"`
		Detail    string `json:"detail"`
		RequestID string `json:"request_id"`
		SinkID    string `json:"sink_id"`
		Count     int64  `json:"count"`
		Outcome   string `json:"outcome"`
	} `json:"timeline"`
	TimelineDropped int `json:"timeline_dropped"`
}

func listIncidents(t *testing.T, base, project, query string, h map[string]string) []incidentSummary {
	t.Helper()
	r := get(t, base+"/console/v1/projects/"+project+"/incidents"+query, h)
	require.Equal(t, http.StatusOK, r.StatusCode, "%s", r.Body)
	var out struct {
		Incidents []incidentSummary `json:"incidents"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &out), "%s", r.Body)
	require.NotNil(t, out.Incidents, "incidents is a list, never null: %s", r.Body)
	return out.Incidents
}

func getIncident(t *testing.T, base, project, id string, h map[string]string) incidentDetail {
	t.Helper()
	r := get(t, base+"/console/v1/projects/"+project+"/incidents/"+id, h)
	require.Equal(t, http.StatusOK, r.StatusCode, "%s", r.Body)
	var d incidentDetail
	require.NoError(t, json.Unmarshal(r.Body, &d), "%s", r.Body)
	return d
}

// byFingerprint indexes a listing; a fingerprint listed twice fails the test.
func byFingerprint(t *testing.T, list []incidentSummary) map[string]incidentSummary {
	t.Helper()
	out := map[string]incidentSummary{}
	for _, i := range list {
		_, dup := out[i.Fingerprint]
		require.False(t, dup, "two incidents of fingerprint %q: %+v", i.Fingerprint, list)
		out[i.Fingerprint] = i
	}
	return out
}

// incidentCall is one call the pipeline made to the agent in incident mode.
type incidentCall struct {
	RequestID  string
	IncidentID string
	Reason     string
	Status     string // the incident's status in the body
	Events     int64  // incident.counts.events: the incident's events when the call was made
	Sent       int    // events in the body
	LeftOut    int    // events_left_out
	At         time.Time
	Body       []byte
	From       string // the caller's end of the connection (ip:port), to tell which process called
}

// incidentAgent plays the customer's agent in incident mode: it notes every call and,
// after answering 200, hands a result for it to the receiver under the call's request id,
// as an agent built on the SDK does. hold, when set, delays the answer to a call (a slow
// agent), during which the caller may go away.
type incidentAgent struct {
	*httptest.Server
	t        *testing.T
	mu       sync.Mutex
	calls    []incidentCall
	cut      []incidentCall // calls whose caller went away before the answer
	results  map[string]string
	receiver string
	key      string
	hold     func(reason string) time.Duration
	arrived  chan incidentCall // every call as it arrives, when not nil (never blocks)
}

func startIncidentAgent(t *testing.T) *incidentAgent {
	t.Helper()
	a := &incidentAgent{t: t, results: map[string]string{}, arrived: make(chan incidentCall, 1024)}
	a.Server = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.Close)
	return a
}

func (a *incidentAgent) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the caller went away mid-body (a process killed while sending): no call
	}
	var b struct {
		Incident struct {
			ID     string `json:"id"`
			Status string `json:"status"`
			Counts struct {
				Events int64 `json:"events"`
			} `json:"counts"`
		} `json:"incident"`
		Reason        string            `json:"reason"`
		Events        []json.RawMessage `json:"events"`
		EventsLeftOut int               `json:"events_left_out"`
	}
	if err := json.Unmarshal(body, &b); err != nil || b.Incident.ID == "" || b.Reason == "" {
		a.t.Errorf("an incident-mode call is {\"incident\": {...}, \"reason\", \"events\", ...}: %v: %.500s", err, body)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	c := incidentCall{RequestID: r.Header.Get("X-Request-Id"), IncidentID: b.Incident.ID, Reason: b.Reason, Status: b.Incident.Status,
		Events: b.Incident.Counts.Events, Sent: len(b.Events), LeftOut: b.EventsLeftOut, At: time.Now(), Body: body, From: r.RemoteAddr}
	select {
	case a.arrived <- c:
	default:
	}
	a.mu.Lock()
	hold := a.hold
	a.mu.Unlock()
	if hold != nil {
		if d := hold(c.Reason); d > 0 {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				a.mu.Lock()
				a.cut = append(a.cut, c)
				a.mu.Unlock()
				return
			}
		}
	}
	a.mu.Lock()
	a.calls = append(a.calls, c)
	receiver, key := a.receiver, a.key
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"status":"accepted"}`))
	if receiver == "" {
		return
	}
	text := "analysis " + c.RequestID + " of " + c.IncidentID
	go func() {
		result, _ := json.Marshal(map[string]any{"request_id": c.RequestID, "payload": map[string]any{"text": text}})
		for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			if postOK(receiver+"/internal/agent-output", key, string(result)) {
				a.mu.Lock()
				a.results[c.RequestID] = text
				a.mu.Unlock()
				return
			}
		}
		a.t.Errorf("the receiver never took the result of %s", c.RequestID)
	}()
}

// postResultsTo makes the agent hand its results to this receiver with the project key.
func (a *incidentAgent) postResultsTo(receiver, key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.receiver, a.key = receiver, key
}

func (a *incidentAgent) setHold(f func(reason string) time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.hold = f
}

// answered returns the calls answered 200, in arrival order.
func (a *incidentAgent) answered() []incidentCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.calls)
}

func (a *incidentAgent) cutOff() []incidentCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.cut)
}

// resultsPosted is request id → the result text the receiver took.
func (a *incidentAgent) resultsPosted() map[string]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]string, len(a.results))
	for k, v := range a.results {
		out[k] = v
	}
	return out
}

// callsOf groups calls by incident; a retry of a call (same request id) counts once, at
// its first arrival.
func callsOf(calls []incidentCall) map[string][]incidentCall {
	out := map[string][]incidentCall{}
	seen := map[string]bool{}
	for _, c := range calls {
		if seen[c.RequestID] {
			continue
		}
		seen[c.RequestID] = true
		out[c.IncidentID] = append(out[c.IncidentID], c)
	}
	return out
}

// repeatedEvents names the events (by their body) that more than one of the calls
// carried, with the calls that carried them: an event reaches the agent once.
func repeatedEvents(t *testing.T, calls []incidentCall) []string {
	t.Helper()
	seen := map[string][]string{}
	var order []string
	for i, c := range calls {
		var b struct {
			Events []struct {
				Body string `json:"body"`
			} `json:"events"`
		}
		require.NoError(t, json.Unmarshal(c.Body, &b))
		for _, e := range b.Events {
			if _, ok := seen[e.Body]; !ok {
				order = append(order, e.Body)
			}
			seen[e.Body] = append(seen[e.Body], fmt.Sprintf("call %d (%s)", i, c.Reason))
		}
	}
	var out []string
	for _, body := range order {
		if len(seen[body]) > 1 {
			out = append(out, fmt.Sprintf("%q in %v", body, seen[body]))
		}
	}
	return out
}

// answeredTimes counts the calls of one incident and reason, a request id answered twice
// counted twice (callsOf would hide it).
func answeredTimes(calls []incidentCall, incidentID, reason string) int {
	n := 0
	for _, c := range calls {
		if c.IncidentID == incidentID && c.Reason == reason {
			n++
		}
	}
	return n
}

// repeatedRequestIDs names the request ids that more than one of the calls carried: a call
// the agent answered is never made again.
func repeatedRequestIDs(calls []incidentCall) []string {
	n := map[string]int{}
	var out []string
	for _, c := range calls {
		if n[c.RequestID]++; n[c.RequestID] == 2 {
			out = append(out, c.RequestID+" ("+c.Reason+" of "+c.IncidentID+")")
		}
	}
	return out
}

// callerPid names which of pids holds the caller's end of a connection the agent stand-in
// is still serving: the socket's inode from /proc/net/tcp{,6} (its local port is the
// caller's, its remote port the agent's), then the process with a descriptor on it.
// 0 when none of them does (the connection is gone).
func callerPid(t *testing.T, caller, agentURL string, pids []int) int {
	t.Helper()
	_, callerPort, err := net.SplitHostPort(caller)
	require.NoError(t, err)
	u, err := url.Parse(agentURL)
	require.NoError(t, err)
	hexPort := func(p string) string {
		n, err := strconv.Atoi(p)
		require.NoError(t, err)
		return fmt.Sprintf("%04X", n)
	}
	local, remote := hexPort(callerPort), hexPort(u.Port())
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) < 10 {
				continue
			}
			if strings.HasSuffix(fs[1], ":"+local) && strings.HasSuffix(fs[2], ":"+remote) {
				inodes["socket:["+fs[9]+"]"] = true
			}
		}
	}
	for _, pid := range pids {
		dir := "/proc/" + strconv.Itoa(pid) + "/fd"
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if link, err := os.Readlink(dir + "/" + fd.Name()); err == nil && inodes[link] {
				return pid
			}
		}
	}
	return 0
}

// notice is a body a webhook destination received: an incident notice or an agent result.
type notice struct {
	Type       string          `json:"type"`
	Transition string          `json:"transition"`
	By         string          `json:"by"`
	Incident   incidentSummary `json:"incident"`
	Text       string          `json:"text"`
	ProjectID  string          `json:"project_id"`
}

// noticeHook is the customer's webhook: it keeps every body it is sent.
type noticeHook struct {
	*httptest.Server
	mu     sync.Mutex
	bodies [][]byte
}

func startNoticeHook(t *testing.T) *noticeHook {
	t.Helper()
	h := &noticeHook{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.bodies = append(h.bodies, b)
		h.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(h.Close)
	return h
}

// notices returns the incident notices received so far, in order.
func (h *noticeHook) notices() []notice {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []notice
	for _, b := range h.bodies {
		var n notice
		if json.Unmarshal(b, &n) == nil && n.Incident.ID != "" {
			out = append(out, n)
		}
	}
	return out
}

// noticeCount counts the notices of one type about one incident the hook received: each
// notice is published under one message id, so a repeat shows as a second one.
func (h *noticeHook) noticeCount(incidentID, typ string) int {
	n := 0
	for _, x := range h.notices() {
		if x.Incident.ID == incidentID && x.Type == typ {
			n++
		}
	}
	return n
}

// slackSignature signs an interaction as Slack does: v0 HMAC-SHA256 over "v0:ts:body".
func slackSignature(secret string, ts int64, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "v0:%d:", ts)
	mac.Write(body)
	return "v0=" + hex.EncodeToString(mac.Sum(nil))
}

// slackButton is the form body Slack posts when a user presses one of the root message's
// buttons (a block_actions interaction).
func slackButton(t *testing.T, actionID, incidentID, username string) []byte {
	t.Helper()
	p, err := json.Marshal(map[string]any{
		"type":    "block_actions",
		"user":    map[string]any{"id": "U0" + username, "username": username, "name": username, "team_id": "T0TEAM"},
		"team":    map[string]any{"id": "T0TEAM", "domain": "acme"},
		"channel": map[string]any{"id": "C0INCIDENTS", "name": "incidents"},
		"actions": []map[string]any{{
			"action_id": actionID, "block_id": "incident_actions", "value": incidentID, "type": "button",
			"text": map[string]any{"type": "plain_text", "text": "Acknowledge"}, "action_ts": strconv.FormatInt(time.Now().Unix(), 10) + ".000100",
		}},
		"response_url": "https://hooks.slack.com/actions/T0TEAM/1/abc",
		"trigger_id":   "1.2.3",
	})
	require.NoError(t, err)
	return []byte("payload=" + url.QueryEscape(string(p)))
}

// postSlack posts an interaction to the receiver signed with secret at time ts.
func postSlack(t *testing.T, base, project, sinkID, secret string, ts time.Time, body []byte) response {
	t.Helper()
	return post(t, base+"/slack/interactions/"+project+"/"+sinkID, "", "application/x-www-form-urlencoded", body, map[string]string{
		"X-Slack-Request-Timestamp": strconv.FormatInt(ts.Unix(), 10),
		"X-Slack-Signature":         slackSignature(secret, ts.Unix(), body),
	})
}

// errorLogs sends error log records (severity 17), one resource per service, in one
// OTLP/protobuf request; attrs are added to every record.
func errorLogs(t *testing.T, base, key string, perService map[string]int, sev int, attrs map[string]string) {
	t.Helper()
	r := post(t, base+"/v1/logs", key, "application/x-protobuf", incidentLogs(perService, sev, attrs, 0), nil)
	require.Equal(t, http.StatusOK, r.StatusCode, "%s", r.Body)
}

func incidentLogs(perService map[string]int, sev int, attrs map[string]string, seq int) []byte {
	ld := plog.NewLogs()
	for _, svc := range slices.Sorted(maps.Keys(perService)) {
		n := perService[svc]
		if n == 0 {
			continue
		}
		rl := ld.ResourceLogs().AppendEmpty()
		rl.Resource().Attributes().PutStr("service.name", svc)
		lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
		for i := 0; i < n; i++ {
			lr := lrs.AppendEmpty()
			lr.SetSeverityNumber(plog.SeverityNumber(sev))
			lr.SetTimestamp(pcommonTime(time.Now()))
			lr.Body().SetStr(fmt.Sprintf("%s: upstream timed out (event %d)", svc, seq+i))
			for k, v := range attrs {
				lr.Attributes().PutStr(k, v)
			}
		}
	}
	b, _ := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	return b
}

// errorStorm sends total error records over d, spread evenly over time and round robin
// over the services, one OTLP request every 100 ms from each receiver in turn; it returns
// how many records of each service were accepted (answered 200). A request that fails is
// not counted and not retried (the storm goes on, as a real one would).
type errorStorm struct {
	done     chan struct{}
	mu       sync.Mutex
	accepted map[string]int
	failed   int
}

func startErrorStorm(t *testing.T, receivers []string, key string, services []string, total int, d time.Duration) *errorStorm {
	s := &errorStorm{done: make(chan struct{}), accepted: map[string]int{}}
	client := &http.Client{Timeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		const tick = 100 * time.Millisecond
		ticks := int(d / tick)
		sent, next := 0, 0
		began := time.Now()
		for i := 0; i < ticks; i++ {
			time.Sleep(time.Until(began.Add(time.Duration(i) * tick)))
			want := total * (i + 1) / ticks
			per := map[string]int{}
			for ; sent < want; sent++ {
				per[services[next%len(services)]]++
				next++
			}
			body := incidentLogs(per, 17, nil, sent)
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, receivers[i%len(receivers)]+"/v1/logs", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/x-protobuf")
			req.Header.Set("X-API-Key", key)
			resp, err := client.Do(req)
			ok := err == nil && resp.StatusCode == http.StatusOK
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			s.mu.Lock()
			if ok {
				for svc, n := range per {
					s.accepted[svc] += n
				}
			} else {
				s.failed++
			}
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() { <-s.done })
	return s
}

// wait returns the records accepted per service once the storm is over.
func (s *errorStorm) wait() (map[string]int, int) {
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.accepted {
		out[k] = v
	}
	return out, s.failed
}

// slackRoots are the Slack stand-in's root messages (posted outside any thread).
func slackRoots(s *testenv.Slack) []testenv.SlackMessage { return s.Roots() }

// slackRoot is the root message whose buttons name the incident, nil before it is posted.
func slackRoot(s *testenv.Slack, incidentID string) *testenv.SlackMessage {
	for _, m := range s.Roots() {
		if strings.Contains(string(m.Blocks), `"`+incidentID+`"`) {
			return &m
		}
	}
	return nil
}

// slackLastUpdate is the root as last updated in place, nil before the first update.
func slackLastUpdate(s *testenv.Slack, root *testenv.SlackMessage) *testenv.SlackMessage {
	if root == nil {
		return nil
	}
	var last *testenv.SlackMessage
	for _, u := range s.Updates() {
		if u.TS == root.TS && u.Channel == root.Channel {
			last = &u
		}
	}
	return last
}

// slackText is what a message shows: its fallback text and its blocks.
func slackText(m *testenv.SlackMessage) string { return m.Text + "\n" + string(m.Blocks) }

// slackReplyTexts are the texts posted in the root's thread.
func slackReplyTexts(s *testenv.Slack, root *testenv.SlackMessage) []string {
	var out []string
	for _, m := range s.Replies(root.TS) {
		out = append(out, slackText(&m))
	}
	return out
}

// slackField is the value of a root message's field ("Events", "Status", "Acknowledged
// by"), "" when it has none.
func slackField(m *testenv.SlackMessage, name string) string {
	if m == nil {
		return ""
	}
	var blocks []struct {
		Fields []struct {
			Text string `json:"text"`
		} `json:"fields"`
	}
	if json.Unmarshal(m.Blocks, &blocks) != nil {
		return ""
	}
	for _, b := range blocks {
		for _, f := range b.Fields {
			if v, ok := strings.CutPrefix(f.Text, "*"+name+"*\n"); ok {
				return v
			}
		}
	}
	return ""
}
