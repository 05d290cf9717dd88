package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// Failure notices: when an agent call or a delivery to a destination is
// dead-lettered, or a target's circuit opens, the project's destinations are told, as
// they are told of usage thresholds: a notice on the project's output stream
// (streams.NoticeMsg), which the sink role delivers to each enabled destination in the
// service's own words. A storm sends one notice per project per interval, the failures
// after it counted in the next ("and N more"); a notice is never sent to the destination
// it is about, and a notice that cannot be delivered is never itself notified about.

// FailureBucket holds, per project, when its destinations were last told of a failure
// and what failed since. It is shared by every pipeline and sink process, so a storm
// seen by several of them still sends one notice per interval.
const FailureBucket = "svc-failure-notices"

// Kinds of failure, the notice's "kind".
const (
	FailedAgentCall   = "agent_call"
	FailedDestination = "destination"
	failedCircuitOpen = "circuit_open"
)

// FailureNoticeType is the notice's "type".
const FailureNoticeType = "delivery_failed"

// maxNoticeError bounds the error a notice repeats (the delivery keeps it whole).
const maxNoticeError = 300

// noticeTimeout bounds one notice's KV update and publish.
const noticeTimeout = 5 * time.Second

// Failure is one failure to tell the project's destinations about.
type Failure struct {
	DeliveryID string    `json:"delivery_id"`
	Kind       string    `json:"kind"`
	Error      string    `json:"error"`
	SinkID     string    `json:"sink_id,omitempty"`
	SinkKind   string    `json:"sink_kind,omitempty"`
	Target     string    `json:"target,omitempty"` // the origin of an open circuit
	At         time.Time `json:"at"`
	// About are the destinations the failure is about, which are not told of it.
	About []string `json:"about,omitempty"`
}

// noticeState is a project's entry in FailureBucket.
type noticeState struct {
	// Sent is when the last notice was decided on: until Sent+interval the failures
	// are counted, not told.
	Sent time.Time `json:"sent"`
	// Pending counts the failures since Sent not told yet; Last is the latest of them,
	// Since the first, About the destinations they are about.
	Pending int       `json:"pending,omitempty"`
	Since   time.Time `json:"since,omitzero"`
	Last    *Failure  `json:"last,omitempty"`
	About   []string  `json:"about,omitempty"`
}

// FailureBody is what the project's destinations get: webhooks as JSON (the contract's
// type, delivery_id, kind, error, url and text, and the rest for programs), chat
// destinations its text with a link to url.
type FailureBody struct {
	Type       string `json:"type"`
	DeliveryID string `json:"delivery_id"`
	Kind       string `json:"kind"`
	Error      string `json:"error"`
	// URL is the delivery in the dashboard; "" when the exporter has no dashboard_url.
	URL       string    `json:"url"`
	Text      string    `json:"text"`
	ProjectID string    `json:"project_id"`
	FailedAt  time.Time `json:"failed_at"`
	// More counts the other failures since the last notice, told only by this number.
	More int `json:"more"`
	// AboutDestinations are the destinations the failures are about; the sink role
	// does not send the notice to them.
	AboutDestinations []string `json:"about_destinations,omitempty"`
}

type notifier struct {
	e        *Engine
	interval time.Duration

	mu sync.Mutex
	kv jetstream.KeyValue

	// flushing holds the projects this process has a timer for, which tells the
	// failures counted during an interval once it ends.
	flushing sync.Map
	// queues hold each project's failures waiting for its report in flight.
	queues sync.Map
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// goMu orders spawn's wg.Add before close's Wait: a dead letter of a replay may
	// land while the exporter shuts down, and WaitGroup forbids an Add from zero
	// racing a Wait.
	goMu   sync.Mutex
	closed bool
}

// spawn runs f in a goroutine that close waits for, unless close has begun.
func (n *notifier) spawn(f func()) bool {
	n.goMu.Lock()
	defer n.goMu.Unlock()
	if n.closed {
		return false
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
	return true
}

func newNotifier(e *Engine) *notifier {
	if !e.cfg.FailureNotices.Enabled {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &notifier{e: e, interval: e.cfg.FailureNotices.Interval, ctx: ctx, cancel: cancel}
}

// close stops the timers and waits for the notices being sent.
func (n *notifier) close() {
	if n == nil {
		return
	}
	n.goMu.Lock()
	n.closed = true
	n.goMu.Unlock()
	n.cancel()
	n.wg.Wait()
}

func (n *notifier) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.kv != nil {
		return n.kv, nil
	}
	js := n.e.js
	kv, err := js.KeyValue(ctx, FailureBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: FailureBucket, Description: "otelcol-svc failure notices per project: the last one sent and what failed since",
			// Longer than any interval: an entry outlives the interval it closes.
			History: 1, TTL: max(24*time.Hour, 2*n.interval), Storage: jetstream.FileStorage,
			Replicas: max(n.e.cfg.DeadLetterStream.Replicas, 1),
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, FailureBucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("failure notice bucket %s: %w", FailureBucket, err)
	}
	n.kv = kv
	return kv, nil
}

// Failed tells the project's destinations of a failure (at most one notice per project
// and interval), unless failure notices are off.
func (e *Engine) Failed(projectID string, f Failure) { e.notices.failed(projectID, f) }

// failed reports a failure of project projectID. It returns at once: the notice is
// decided and sent in the background, never holding up the deliveries.
func (n *notifier) failed(projectID string, f Failure) {
	if n == nil || n.ctx.Err() != nil {
		return
	}
	if p, ok := n.e.projects.Project(projectID); !ok || !slices.ContainsFunc(p.Sinks, func(s mirror.Sink) bool { return s.Enabled }) {
		return // nobody to tell: no bucket write for a project without destinations
	}
	f.At = time.Now().UTC()
	f.Error = truncate(f.Error, maxNoticeError)
	// One report per project in flight in this process, taking what failed meanwhile
	// with it: a storm of a thousand dead letters is a few bucket writes, not a
	// thousand writers contending for one key.
	q, _ := n.queues.LoadOrStore(projectID, &failureQueue{})
	fq := q.(*failureQueue)
	fq.mu.Lock()
	fq.queued = append(fq.queued, f)
	start := !fq.running
	fq.running = true
	fq.mu.Unlock()
	if !start {
		return
	}
	n.spawn(func() {
		for {
			fq.mu.Lock()
			batch := fq.queued
			fq.queued = nil
			if len(batch) == 0 {
				fq.running = false
				fq.mu.Unlock()
				return
			}
			fq.mu.Unlock()
			ctx, cancel := context.WithTimeout(n.ctx, noticeTimeout)
			if err := n.report(ctx, projectID, batch); err != nil {
				n.e.logger.Warn("could not tell the project's destinations of failed deliveries",
					zap.String("project", projectID), zap.Int("failures", len(batch)),
					zap.String("delivery_id", batch[len(batch)-1].DeliveryID), zap.Error(err))
			}
			cancel()
		}
	})
}

// failureQueue holds a project's failures waiting for the report in flight.
type failureQueue struct {
	mu      sync.Mutex
	running bool
	queued  []Failure
}

// report counts the failures of batch (in the order they happened) in the project's
// entry. When the project's last notice is an interval old (or there was none) it sends
// a notice of the latest, counting the others; else they are told with the next.
func (n *notifier) report(ctx context.Context, projectID string, batch []Failure) error {
	f := batch[len(batch)-1]
	var about []string
	for _, b := range batch {
		about = union(about, b.About)
	}
	kv, err := n.bucket(ctx)
	if err != nil {
		return err
	}
	var (
		send   bool
		before noticeState
		now    noticeState
	)
	_, err = streams.UpdateKV(ctx, kv, projectID, func(old []byte, exists bool) ([]byte, error) {
		before = noticeState{}
		if exists {
			_ = json.Unmarshal(old, &before) // a damaged entry is a fresh start
		}
		send = before.Sent.IsZero() || !f.At.Before(before.Sent.Add(n.interval))
		if send {
			now = noticeState{Sent: f.At}
		} else {
			now = before
			if now.Pending == 0 {
				now.Since = batch[0].At
			}
			now.Pending += len(batch)
			now.Last = &f
			now.About = union(now.About, about)
		}
		return json.Marshal(now)
	})
	if err != nil {
		return err
	}
	if !send {
		n.flushAt(projectID, now.Sent.Add(n.interval))
		return nil
	}
	// The failures counted before and not told yet (their flush's process died) are
	// told with this one, and so are the batch's others.
	f.About = union(about, before.About)
	since := before.Since
	if before.Pending == 0 {
		since = batch[0].At
	}
	return n.send(ctx, projectID, now.Sent, f, before.Pending+len(batch)-1, since)
}

// flushAt sets this process's timer that tells, at when, the failures counted during
// the interval, unless another process or a new failure told them first.
func (n *notifier) flushAt(projectID string, when time.Time) {
	if _, set := n.flushing.LoadOrStore(projectID, struct{}{}); set {
		return
	}
	n.spawn(func() {
		t := time.NewTimer(time.Until(when))
		defer t.Stop()
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		n.flushing.Delete(projectID)
		ctx, cancel := context.WithTimeout(n.ctx, noticeTimeout)
		defer cancel()
		if err := n.flush(ctx, projectID); err != nil {
			n.e.logger.Warn("could not tell the project's destinations of the failed deliveries of the last interval; they are told with the next failure",
				zap.String("project", projectID), zap.Error(err))
		}
	})
}

// flush sends the notice of the failures counted during the interval that ended.
func (n *notifier) flush(ctx context.Context, projectID string) error {
	kv, err := n.bucket(ctx)
	if err != nil {
		return err
	}
	var (
		before noticeState
		later  time.Time
	)
	at := time.Now().UTC()
	_, err = streams.UpdateKV(ctx, kv, projectID, func(old []byte, exists bool) ([]byte, error) {
		before, later = noticeState{}, time.Time{}
		if !exists || json.Unmarshal(old, &before) != nil || before.Pending == 0 || before.Last == nil {
			return nil, streams.ErrKVUnchanged
		}
		if end := before.Sent.Add(n.interval); at.Before(end) {
			// Another process told a failure meanwhile and a new interval runs.
			later = end
			return nil, streams.ErrKVUnchanged
		}
		return json.Marshal(noticeState{Sent: at})
	})
	switch {
	case err != nil:
		return err
	case !later.IsZero():
		n.flushAt(projectID, later)
		return nil
	case before.Last == nil:
		return nil
	}
	f := *before.Last
	f.About = before.About
	return n.send(ctx, projectID, at, f, before.Pending-1, before.Since)
}

// retryNotice is how soon a notice whose publish failed is tried again (the interval, when
// shorter).
const retryNotice = 30 * time.Second

// send publishes the notice the entry was just claimed for (at sent). When that fails
// the claim is given back as pending failures whose interval ends in retryNotice, and
// this process's timer tries them again then (or a new failure, or another process).
func (n *notifier) send(ctx context.Context, projectID string, sent time.Time, f Failure, more int, since time.Time) error {
	err := n.publish(ctx, projectID, sent, f, more, since)
	if err == nil {
		return nil
	}
	end := time.Now().UTC().Add(min(retryNotice, n.interval))
	kv, kerr := n.bucket(ctx)
	if kerr == nil {
		_, kerr = streams.UpdateKV(context.WithoutCancel(ctx), kv, projectID, func(old []byte, exists bool) ([]byte, error) {
			var st noticeState
			if !exists || json.Unmarshal(old, &st) != nil || !st.Sent.Equal(sent) {
				return nil, streams.ErrKVUnchanged // told or claimed since by another
			}
			back := noticeState{Sent: end.Add(-n.interval), Pending: st.Pending + 1 + more, Since: since, Last: &f,
				About: union(f.About, st.About)}
			if st.Pending > 0 {
				back.Last = st.Last
			}
			return json.Marshal(back)
		})
	}
	if kerr == nil {
		n.flushAt(projectID, end)
	}
	return errors.Join(err, kerr)
}

// publish puts the notice of f (and more others since since) on the project's output
// stream, for each of its enabled destinations but those f is about. Its id is the
// interval's start: two processes deciding the same notice publish it once.
func (n *notifier) publish(ctx context.Context, projectID string, sent time.Time, f Failure, more int, since time.Time) error {
	proj, ok := n.e.projects.Project(projectID)
	if !ok || !streams.ValidProjectID(projectID) {
		return nil
	}
	if !slices.ContainsFunc(proj.Sinks, func(s mirror.Sink) bool { return s.Enabled && !slices.Contains(f.About, s.ID) }) {
		return nil // nobody left to tell
	}
	body, err := json.Marshal(FailureBody{
		Type: FailureNoticeType, DeliveryID: f.DeliveryID, Kind: f.Kind, Error: f.Error,
		URL: n.e.DeliveryLink(projectID, f.DeliveryID), Text: failureText(proj, f, more, since, n.e.cfg.Target.Circuit.ProbeInterval),
		ProjectID: projectID, FailedAt: f.At, More: more, AboutDestinations: f.About,
	})
	if err != nil {
		return err
	}
	id := streams.NoticeIDPrefix + "failed-" + projectID + "-" + strconv.FormatInt(sent.UnixNano(), 10)
	// The sink role creates the stream with its consumers; this is for a project whose
	// destinations have not been read from yet.
	if err := streams.Create(ctx, n.e.js, streams.OutputConfig(projectID, n.e.cfg.DeadLetterStream)); err != nil {
		return err
	}
	if _, err := n.e.js.PublishMsg(ctx, streams.NoticeMsg(projectID, id, body)); err != nil {
		return err
	}
	// Idle destinations are not polled: wake the sink role, as the receiver does for a
	// result (a lost wake is caught by its sweep).
	_ = n.e.nc.Publish(streams.WakeSubject(streams.WakeOutput, projectID), nil)
	return nil
}

// circuitOpened tells the project's destinations that deliveries to origin wait, but
// not those at origin (they share its circuit), nor of a notice's own delivery.
func (e *Engine) circuitOpened(o Request, origin, last string) {
	// A notice's request id is its notice id (streams.NoticeMsg).
	if e.notices == nil || strings.HasPrefix(o.RequestID, streams.NoticeIDPrefix) {
		return
	}
	f := Failure{DeliveryID: o.LogID, Kind: failedCircuitOpen, Error: last, Target: origin}
	if p, ok := e.projects.Project(o.Project); ok {
		f.About = sinksAt(p, origin)
	}
	e.notices.failed(o.Project, f)
}

// failureText is the notice in the service's own words: one sentence, and a second one
// counting what else failed.
func failureText(p mirror.Project, f Failure, more int, since time.Time, probe time.Duration) string {
	name := p.Name
	if name == "" {
		name = p.ID
	}
	// The error is a sentence of its own; the notice ends it.
	f.Error = strings.TrimRight(f.Error, ". ")
	var s string
	switch f.Kind {
	case FailedAgentCall:
		s = fmt.Sprintf("otelcol-svc: in project %s, a call to the agent failed and was dead-lettered: %s.", name, f.Error)
	case failedCircuitOpen:
		s = fmt.Sprintf("otelcol-svc: in project %s, deliveries to %s are paused after sustained failure (its circuit is open; one trial request every %s): %s.",
			name, f.Target, probe, f.Error)
	default:
		s = fmt.Sprintf("otelcol-svc: in project %s, a delivery to destination %s (%s) failed and was dead-lettered: %s.",
			name, f.SinkID, f.SinkKind, f.Error)
	}
	if more > 0 {
		what := "deliveries"
		if more == 1 {
			what = "delivery"
		}
		s += fmt.Sprintf(" %d more %s failed since %s.", more, what, since.UTC().Format("15:04:05 UTC"))
	}
	return s
}

// DeliveryLink is the delivery's page in the dashboard, or "" without a dashboard_url:
// no link rather than a wrong one.
func (e *Engine) DeliveryLink(projectID, deliveryID string) string {
	if e.cfg.DashboardURL == "" || deliveryID == "" {
		return ""
	}
	return strings.TrimSuffix(e.cfg.DashboardURL, "/") + "/projects/" + url.PathEscape(projectID) +
		"/deliveries?delivery=" + url.QueryEscape(deliveryID)
}

// ProjectLink is one of the project's pages in the dashboard, or "".
func (e *Engine) ProjectLink(projectID, section string) string {
	if e.cfg.DashboardURL == "" {
		return ""
	}
	return strings.TrimSuffix(e.cfg.DashboardURL, "/") + "/projects/" + url.PathEscape(projectID) + "/" + section
}

// sinksAt are the project's destinations whose URL has origin as its target (they share
// its circuit).
func sinksAt(p mirror.Project, origin string) []string {
	var ids []string
	for _, s := range p.Sinks {
		if targetOrigin(s.URL) == origin {
			ids = append(ids, s.ID)
		}
	}
	return ids
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
