package ingestreceiver

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
)

// Agent results are counted in their project's ledger (deliverylog): results,
// and those under a request id never issued to the project (unmatched). The ledger is
// opened in the background on the NATS connection the projectauth extension lends (the
// configmirror extension's), so the receiver starts, and takes results, while NATS is
// away; what is counted before it opens is kept in memory (for at most maxEarlyProjects
// projects) and handed over then.

// maxEarlyProjects bounds the projects whose counts wait in memory for the ledger.
const maxEarlyProjects = 10000

const (
	ledgerOpenTimeout  = 5 * time.Second
	ledgerRetryInitial = 250 * time.Millisecond
	ledgerRetryMax     = 30 * time.Second
)

type resultCounts struct {
	mu     sync.Mutex
	ledger *deliverylog.Ledger
	early  map[string]deliverylog.Counters
	// lost counts results not counted: the ledger never opened and early was full.
	lost int64
}

// count adds one stored result of project.
func (c *resultCounts) count(project string, unmatched bool) {
	n := deliverylog.Counters{Results: 1}
	if unmatched {
		n.Unmatched = 1
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ledger != nil {
		c.ledger.Add(project, n)
		return
	}
	if c.early == nil {
		c.early = map[string]deliverylog.Counters{}
	}
	cur, ok := c.early[project]
	if !ok && len(c.early) >= maxEarlyProjects {
		c.lost++
		return
	}
	cur.Results += n.Results
	cur.Unmatched += n.Unmatched
	c.early[project] = cur
}

// opened hands the early counts to l, which counts from now on.
func (c *resultCounts) opened(l *deliverylog.Ledger) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for p, n := range c.early {
		l.Add(p, n)
	}
	c.early, c.ledger = nil, l
}

// close flushes the ledger, if it opened.
func (c *resultCounts) close(ctx context.Context) error {
	c.mu.Lock()
	l := c.ledger
	c.ledger = nil
	c.mu.Unlock()
	if l == nil {
		return nil
	}
	return l.Close(ctx)
}

// startLedger opens the ledger in the background, retrying while NATS is away.
func (r *ingestReceiver) startLedger(js jetstream.JetStream) {
	if js == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.stopLedger = cancel
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		wait := ledgerRetryInitial
		for logged := false; ; logged = true {
			octx, cancel := context.WithTimeout(ctx, ledgerOpenTimeout)
			l, err := deliverylog.OpenLedger(octx, js, 0)
			cancel()
			if err == nil {
				r.results.opened(l)
				return
			}
			if !logged {
				r.settings.Logger.Debug("ledger not open yet: agent results are counted in memory until it is; retrying", zap.Error(err))
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, ledgerRetryMax)
		}
	}()
}

// Results of incident calls are attached to their incident (its last_result and a
// timeline entry) once stored: the console and the Slack root message show what the
// agent found. Results are few; a result that is no incident call costs one KV get.

const (
	// attachTimeout bounds the attaching, which the result's answer waits for.
	attachTimeout = 2 * time.Second
	// maxResultText is the most of a result's text an incident keeps.
	maxResultText = 500
)

// attachIncidentResult attaches a stored result to the incident whose call requestID
// was, if any. A failure is logged, never answered: the result itself is stored.
func (r *ingestReceiver) attachIncidentResult(ctx context.Context, project, requestID string, payload []byte, unmatched bool) {
	if unmatched || r.dp == nil {
		return // never issued to this project, so no call of its incidents
	}
	js := r.dp.JetStream()
	if js == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), attachTimeout)
	defer cancel()
	st, err := r.incidents.Store(ctx, js)
	if st == nil {
		if err != nil {
			r.settings.Logger.Debug("the incident store could not be opened to attach a result", zap.String("project_id", project), zap.Error(err))
		}
		return
	}
	// Most results answer no incident call: find that out before reading the payload.
	if ok, err := st.IsCall(ctx, project, requestID); !ok || err != nil {
		if err != nil {
			r.settings.Logger.Debug("the incident of a result could not be looked up", zap.String("project_id", project), zap.Error(err))
		}
		return
	}
	if _, err := r.incidents.AttachResult(ctx, js, project, requestID, resultText(payload)); err != nil {
		r.settings.Logger.Debug("a result could not be attached to its incident", zap.String("project_id", project), zap.Error(err))
	}
}

// resultText is what an incident shows of a result, as chat destinations show it: its
// text, summary or message field, else the payload as compact JSON; at most
// maxResultText characters.
func resultText(payload []byte) string {
	var fields struct {
		Text    json.RawMessage `json:"text"`
		Summary json.RawMessage `json:"summary"`
		Message json.RawMessage `json:"message"`
	}
	text := ""
	if json.Unmarshal(payload, &text) == nil && strings.TrimSpace(text) != "" {
		return firstRunes(strings.ToValidUTF8(text, "\uFFFD"), maxResultText)
	}
	text = ""
	if json.Unmarshal(payload, &fields) == nil {
		for _, raw := range []json.RawMessage{fields.Text, fields.Summary, fields.Message} {
			var s string
			if json.Unmarshal(raw, &s) == nil && strings.TrimSpace(s) != "" {
				text = s
				break
			}
		}
	}
	if text == "" {
		var compact bytes.Buffer
		if json.Compact(&compact, payload) == nil {
			text = compact.String()
		} else {
			text = string(payload)
		}
	}
	return firstRunes(strings.ToValidUTF8(text, "\uFFFD"), maxResultText)
}

// firstRunes is s cut to n characters.
func firstRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}
