package sinkexporter

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/incident"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/internal/textfmt"
)

// headerIncidentID names the incident of a result sent to a webhook.
const headerIncidentID = "X-Incident-Id"

// incidentRef is the incident an item is about: it is one of its notices, or the result
// of one of its calls.
type incidentRef struct {
	id, title string
	// notice is the incident notice the item is.
	notice *noticeFields
	// result: the item is the result of a call about the incident, inc as found by the
	// call's request id.
	result bool
	inc    incident.Incident
}

// incidentOf finds the incident an item is about. Only a project in incident mode has
// results of incident calls: the others' results cost no lookup.
func (e *sinkExporter) incidentOf(ctx context.Context, proj mirror.Project, it pipelinedata.Item, n noticeFields) (incidentRef, error) {
	if streams.IsNotice(it.Signal, it.RequestID, it.Unmatched) {
		if !strings.HasPrefix(n.Type, "incident.") {
			return incidentRef{}, nil
		}
		if _, _, ok := incident.ParseID(n.Incident.ID); !ok {
			return incidentRef{}, nil // delivered as the notice it is, in its own words
		}
		return incidentRef{id: n.Incident.ID, title: n.Incident.Title, notice: &n}, nil
	}
	if it.Unmatched || it.RequestID == "" || proj.Pipeline.EffectiveMode() != mirror.ModeIncident {
		return incidentRef{}, nil
	}
	st, err := e.incidentStore(ctx)
	if err != nil {
		return incidentRef{}, &errLater{"the incidents cannot be read (" + err.Error() + ")"}
	}
	inc, _, ok, err := st.ByRequest(ctx, proj.ID, it.RequestID)
	if err != nil {
		return incidentRef{}, &errLater{"the incident of the result cannot be read (" + err.Error() + ")"}
	}
	if !ok {
		return incidentRef{}, nil
	}
	return incidentRef{id: inc.ID, title: inc.Title, result: true, inc: inc}, nil
}

// storeTimeout bounds opening the incidents' bucket.
const storeTimeout = 5 * time.Second

// incidentStore opens the incidents' bucket on first use, so a NATS away at start does
// not stop the exporter, and a sink role without incidents never waits on it.
func (e *sinkExporter) incidentStore(ctx context.Context) (*incident.Store, error) {
	e.incMu.Lock()
	defer e.incMu.Unlock()
	if e.incidents != nil {
		return e.incidents, nil
	}
	if e.js == nil {
		return nil, fmt.Errorf("not connected to NATS")
	}
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	st, err := incident.Open(ctx, e.js, e.cfg.incidentReplicas())
	if err != nil {
		return nil, err
	}
	e.incidents = st
	return st, nil
}

// incidentLink is the incident's page in the dashboard, or "".
func (e *sinkExporter) incidentLink(projectID, id string) string {
	return e.engine.ProjectLink(projectID, "incidents/"+url.PathEscape(id))
}

// noticeChatPayload is an incident notice as a chat destination reads it: one line,
// "[Incident] <title>: <what happened>", as a payload for textfmt (whose escaping and
// link rules the title, an event's text, goes through).
func noticeChatPayload(n *noticeFields) []byte {
	title := textfmt.OneLine(n.Incident.Title, textfmt.MaxTitle)
	if title == "" {
		title = n.Incident.ID
	}
	b, _ := json.Marshal(map[string]string{"text": "[Incident] " + title + ": " + noticePhrase(n)})
	return b
}

// noticePhrase says what a notice tells, by its transition.
func noticePhrase(n *noticeFields) string {
	s := n.Incident
	by := ""
	if n.By != "" {
		by = " by " + textfmt.OneLine(n.By, 200)
	}
	switch n.Transition {
	case "opened":
		return "opened (" + events(s.Events) + ")"
	case "reopened":
		return "reopened (" + events(s.Events) + ")"
	case "call":
		return fmt.Sprintf("the agent was called (%s, %s so far)", events(s.Events), plural(int64(s.Calls), "call"))
	case "acknowledged":
		return "acknowledged" + by
	case "muted":
		if s.MutedUntil != nil {
			return "muted" + by + " until " + s.MutedUntil.UTC().Format("15:04 UTC")
		}
		return "muted" + by
	case "resolved":
		switch n.By {
		case "resolve_when":
			return "resolved (an event resolved it; " + events(s.Events) + ")"
		case "resolve_after":
			return "resolved (no new events; " + events(s.Events) + ")"
		}
		return "resolved" + by
	case "reinvestigate":
		return "to be investigated again" + by
	}
	if t := textfmt.OneLine(n.Text, 500); t != "" {
		return t
	}
	return s.Status
}

func events(n int64) string { return plural(n, "event") }

func plural(n int64, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.FormatInt(n, 10) + " " + word + "s"
}

// resultText is a result as the incident's last result shows it: its text, summary or
// message, else its JSON, at most 500 characters.
func resultText(payload []byte) string {
	var doc map[string]any
	if json.Unmarshal(payload, &doc) == nil {
		for _, k := range []string{"text", "summary", "message"} {
			if s, ok := doc[k].(string); ok && strings.TrimSpace(s) != "" {
				return cutRunes(s, 500)
			}
		}
	}
	var b bytes.Buffer
	if json.Compact(&b, payload) == nil {
		return cutRunes(b.String(), 500)
	}
	return cutRunes(string(payload), 500)
}

func cutRunes(s string, n int) string {
	s = strings.ToValidUTF8(s, "")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
