package deliverylog

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// WriterConfig bounds the writer's memory and each project's share of the log.
type WriterConfig struct {
	Buffer   int // events waiting to be published; 0 means 4096
	InFlight int // deliveries not finished kept in memory; 0 means 10000
	// MaxPerProject is how many deliveries a project keeps; older ones are purged (every
	// TrimInterval), so one busy project cannot push the others' out of the shared
	// stream. 0 means DefaultMaxPerProject.
	MaxPerProject int
	// MaxBytesPerProject is about how many bytes of the shared stream a project keeps:
	// each trim keeps at most this divided by the average size of the project's
	// messages this writer published since the last trim. 0 means
	// DefaultMaxBytesPerProject; negative means no byte bound (the count bound only).
	MaxBytesPerProject int64
	TrimInterval       time.Duration // 0 means a minute
	// Linger is how long a round waits after its first event before it takes what
	// queued meanwhile and publishes: a delivery recorded, tried and finished within it
	// is one message, not two or three, and senders never wake the writer in between.
	// Buffer must hold a linger's events. 0 publishes what is queued at once.
	Linger time.Duration
}

// DefaultMaxPerProject bounds a project's log by count: with bodies capped that alone
// would allow about 1.4 GB, so DefaultMaxBytesPerProject bounds it by size too.
const DefaultMaxPerProject = 20000

// DefaultMaxBytesPerProject is 80 MiB: the default 8 GiB stream holds 102 projects at
// their full budget (20,000 deliveries of 4 KiB on average), so one busy project cannot
// push the others' deliveries out before their 7 days.
const DefaultMaxBytesPerProject = 80 << 20

type event struct {
	op      byte // 'r' record, 'a' attempt, 'n' next attempt due, 'f' finish, 'x' abandon, 's' superseded
	project string
	d       Delivery
	attempt Attempt
	answer  []byte
	trunc   bool // answer was cut to MaxAnswer
	final   Final
}

// Writer logs deliveries without waiting on NATS: every call is a non-blocking send on
// a bounded channel; when it is full the event is dropped and counted, so the delivery
// itself is never slowed by the log. Events that arrive together are applied together
// and each delivery they touched is published once: a delivery that succeeds at once
// (recorded, tried, finished) costs one message, not three.
type Writer struct {
	js  jetstream.JetStream
	cfg WriterConfig
	// ch holds pooled events (eventPool): a buffer of events by value (about 570 B
	// each) was 4.6 MB of live heap per writer at Buffer 8192, idle or not, and the GC
	// paces the heap from what is live.
	ch       chan *event
	dropped  atomic.Int64
	failed   atomic.Int64
	done     chan struct{}
	once     sync.Once
	stopTrim chan struct{}
	trimDone chan struct{}

	mu      sync.Mutex
	written map[string]written // projects published since the last trim
	// cut counts trims that found the stream discarding deliveries younger than its
	// max age (RetentionCut).
	cut atomic.Int64

	// side holds the final events (finish, abandon, superseded) that found the buffer
	// full: losing one would leave a delivery retrying forever (and replay refusing it
	// as busy), so they wait here, up to InFlight of them, and run takes them each round.
	smu  sync.Mutex
	side []event
	wake chan struct{}
	// early holds, in run's goroutine, a final taken from side before its delivery's
	// record (still in the buffer behind it); the record picks it up.
	early map[key]earlyFinal
	swept time.Time // the last sweep of early
}

// written is what the writer published of a project since the last trim.
type written struct{ bytes, msgs int64 }

type earlyFinal struct {
	e  event
	at time.Time
}

// earlyTTL is how long a final waits for its record; a record the full buffer dropped
// never comes.
const earlyTTL = time.Minute

// NewWriter starts the goroutines that publish and trim the log.
func NewWriter(js jetstream.JetStream, cfg WriterConfig) *Writer {
	if cfg.Buffer <= 0 {
		cfg.Buffer = 4096
	}
	if cfg.InFlight <= 0 {
		cfg.InFlight = 10000
	}
	if cfg.MaxPerProject <= 0 {
		cfg.MaxPerProject = DefaultMaxPerProject
	}
	if cfg.MaxBytesPerProject == 0 {
		cfg.MaxBytesPerProject = DefaultMaxBytesPerProject
	}
	if cfg.TrimInterval <= 0 {
		cfg.TrimInterval = time.Minute
	}
	w := &Writer{js: js, cfg: cfg, ch: make(chan *event, cfg.Buffer), done: make(chan struct{}),
		stopTrim: make(chan struct{}), trimDone: make(chan struct{}), written: map[string]written{},
		wake: make(chan struct{}, 1), early: map[key]earlyFinal{}}
	go w.run()
	go w.trimLoop()
	return w
}

// Dropped counts log events lost because the buffer was full or the delivery was not
// known (evicted or never recorded).
func (w *Writer) Dropped() int64 { return w.dropped.Load() }

// Failed counts publishes NATS refused or never acknowledged.
func (w *Writer) Failed() int64 { return w.failed.Load() }

// RetentionCut counts the trims (one per TrimInterval) that found the shared stream
// full with its oldest delivery younger than its max age: discard-old is removing
// deliveries before their 7 days, and the stream's max bytes or the per-project
// bounds need raising (or lowering).
func (w *Writer) RetentionCut() int64 { return w.cut.Load() }

func (w *Writer) send(e event) {
	if e.project == "" || !validToken(e.project) || !validToken(e.d.ID) {
		w.dropped.Add(1)
		return
	}
	p := eventPool.Get().(*event)
	*p = e
	select {
	case w.ch <- p:
	default:
		putEvent(p)
		if e.op == 'r' || e.op == 'a' || e.op == 'n' {
			w.dropped.Add(1) // detail: shed under pressure
			return
		}
		w.smu.Lock()
		if len(w.side) >= w.cfg.InFlight {
			w.smu.Unlock()
			w.dropped.Add(1)
			return
		}
		w.side = append(w.side, e)
		w.smu.Unlock()
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// takeSide applies the final events that found the buffer full. A finish or abandon
// of a delivery not open yet waits in early for its record.
func (w *Writer) takeSide(open, touched map[key]*Delivery, order []key) []key {
	w.smu.Lock()
	side := w.side
	w.side = nil
	w.smu.Unlock()
	if len(side) == 0 && len(w.early) == 0 {
		return order
	}
	now := time.Now()
	for _, e := range side {
		k := key{e.project, e.d.ID}
		if (e.op == 'f' || e.op == 'x') && open[k] == nil {
			if len(w.early) >= w.cfg.InFlight {
				w.dropped.Add(1)
				continue
			}
			w.early[k] = earlyFinal{e, now}
			continue
		}
		order = w.apply(open, touched, order, e)
	}
	// Once a second at most: under overload a round comes with every event.
	if len(w.early) > 0 && now.Sub(w.swept) >= time.Second {
		w.swept = now
		for k, f := range w.early {
			if now.Sub(f.at) > earlyTTL {
				delete(w.early, k)
				w.dropped.Add(1)
			}
		}
	}
	return order
}

// Record starts a delivery (state pending unless set), with the request body (capped).
func (w *Writer) Record(project string, d Delivery) {
	d.RequestBody, d.RequestTruncated = capBytes(d.RequestBody, MaxRequestBody)
	d.Answer, d.AnswerTruncated = capBytes(d.Answer, MaxAnswer)
	if len(d.Seqs) > MaxSeqs {
		d.Seqs = d.Seqs[:MaxSeqs]
	}
	d.AttemptLog = nil
	w.send(event{op: 'r', project: project, d: d})
}

// Attempt appends one try to delivery id, with the answer it got (its first MaxAnswer
// bytes are kept; nil keeps the previous one) and the headers it sent (a.RequestHeaders,
// from LogHeaders, bounded here). A failed attempt (Error set) or a second
// one makes the state retrying.
func (w *Writer) Attempt(project, id string, a Attempt, answer []byte) {
	a.Error = capString(a.Error, MaxError)
	a.RequestHeaders = boundHeaders(a.RequestHeaders)
	e := event{op: 'a', project: project, d: Delivery{ID: id}, attempt: a}
	if answer != nil {
		e.answer, e.trunc = capBytes(answer, MaxAnswer)
	}
	w.send(e)
}

// NextAttempt says when the next try of delivery id is due, once a failed try has
// scheduled one: the console shows "next retry at" while the delivery waits. The next
// Attempt, Finish or Abandon clears it.
func (w *Writer) NextAttempt(project, id string, at time.Time) {
	w.send(event{op: 'n', project: project, d: Delivery{ID: id, NextAttemptAt: at.UTC()}})
}

// Finish sets the final state (delivered or dead_lettered), the answer and where the
// dead letter is.
func (w *Writer) Finish(project, id string, f Final) {
	e := event{op: 'f', project: project, d: Delivery{ID: id}}
	if f.Answer != nil {
		f.Answer, e.trunc = capBytes(f.Answer, MaxAnswer)
	}
	e.final = f
	w.send(e)
}

// Abandon forgets delivery id without a final state: its work was interrupted (a
// shutdown) and will be done again under a new delivery. The log keeps its last state
// with reason as its error; the writer stops holding it in memory, so interrupted
// deliveries cannot fill WriterConfig.InFlight.
func (w *Writer) Abandon(project, id, reason string) {
	w.send(event{op: 'x', project: project, d: Delivery{ID: id, Error: capString(reason, MaxError)}})
}

// Superseded marks a finished delivery d (as read back from the log) as replayed by the
// delivery named by: the console then leaves it out of bulk replays (the replay, which
// names it in replay_of, stands for it), so replaying "all dead letters" twice does not
// send the same records twice.
func (w *Writer) Superseded(project string, d Delivery, by string) {
	d.ReplayedBy = by
	w.send(event{op: 's', project: project, d: d})
}

// Close publishes what is buffered and waits for the acks, or until ctx ends.
func (w *Writer) Close(ctx context.Context) error {
	w.once.Do(func() { close(w.ch); close(w.stopTrim) })
	select {
	case <-w.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-w.js.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type key struct{ project, id string }

// eventPool recycles the writer's events: one per Record, Attempt and Finish of every
// delivery, too many to allocate each (the sink's CPU per delivery), too large to buffer
// by value.
var eventPool = sync.Pool{New: func() any { return new(event) }}

// putEvent returns p to the pool without the bodies and strings it referred to.
func putEvent(p *event) {
	*p = event{}
	eventPool.Put(p)
}

const (
	ackWait = 5 * time.Second
	// maxCoalesce bounds how many queued events one round applies before publishing.
	maxCoalesce = 1024
)

func (w *Writer) run() {
	defer close(w.done)
	open := make(map[key]*Delivery)
	// touched keeps the order in which this round first touched each delivery, so the
	// stream holds them in the order they happened (Trim drops the oldest).
	touched := make(map[key]*Delivery)
	var order []key
	type roundAck struct {
		f jetstream.PubAckFuture
		n int // messages of the round it stands for
	}
	var acks []roundAck
	var buf []byte
	// Acks are collected in batches in this goroutine rather than one goroutine per
	// publish: it keeps the writer's own cost low so fewer events are dropped.
	// The caller's JetStream context may have no async publish timeout, so a future can
	// stay open while NATS is away: a batch waits at most ackWait, the rest count failed.
	settle := func() {
		timeout := time.NewTimer(ackWait)
		defer timeout.Stop()
		for _, a := range acks {
			select {
			case <-a.f.Ok():
			case <-a.f.Err():
				w.failed.Add(int64(a.n))
			case <-timeout.C:
				w.failed.Add(int64(a.n))
				timeout.Reset(0)
			}
		}
		acks = acks[:0]
	}
	defer settle()
	var linger *time.Timer
	if w.cfg.Linger > 0 {
		linger = time.NewTimer(w.cfg.Linger)
		defer linger.Stop()
	}
	rounds := maxCoalesce
	for closed := false; !closed; {
		select {
		case p, ok := <-w.ch:
			if !ok {
				closed = true
				break
			}
			order = w.apply(open, touched, order, *p)
			putEvent(p)
		case <-w.wake:
		}
		if linger != nil && !closed {
			// Sleep through the linger instead of taking each event as it comes: a
			// sender then only copies into the buffer, never wakes this goroutine, and
			// the round takes what queued meanwhile (Close ends the wait).
			linger.Reset(w.cfg.Linger)
			select {
			case <-linger.C:
			case <-w.stopTrim:
			}
			rounds = max(maxCoalesce, cap(w.ch))
		}
		// Whatever else is queued joins this round.
	drain:
		for range rounds {
			select {
			case p, ok := <-w.ch:
				if !ok {
					break drain
				}
				order = w.apply(open, touched, order, *p)
				putEvent(p)
			default:
				break drain
			}
		}
		order = w.takeSide(open, touched, order)
		// One acknowledged publish per round, the last (a connection's messages keep
		// their order, so its ack says the stream took the round); the others are
		// plain publishes. An ack per delivery cost the sink role a tenth of its CPU
		// (parsing acks, tracking futures) for a log that is best effort anyway: a
		// round whose last message NATS refused counts every message of it failed.
		nc := w.js.Conn()
		sizes := make(map[string]written, 4)
		for i, k := range order {
			d := touched[k]
			delete(touched, k)
			var err error
			if buf, err = appendDelivery(buf[:0], d); err != nil {
				w.failed.Add(1)
				continue
			}
			data := buf
			msg := &nats.Msg{Subject: subject(k.project, k.id), Data: data, Header: headers(d)}
			sz := sizes[k.project]
			sz.bytes += int64(msgSize(msg))
			sz.msgs++
			sizes[k.project] = sz
			if i < len(order)-1 {
				if err := nc.PublishMsg(msg); err != nil {
					w.failed.Add(1)
				}
				continue
			}
			// PublishAsync keeps data until the ack: it needs its own copy.
			msg.Data = append([]byte(nil), data...)
			f, err := w.js.PublishMsgAsync(msg)
			if err != nil {
				w.failed.Add(int64(len(order)))
				continue
			}
			acks = append(acks, roundAck{f, len(order)})
			if len(acks) >= 64 {
				settle()
			}
		}
		order = order[:0]
		w.mu.Lock()
		for p, sz := range sizes {
			cur := w.written[p]
			cur.bytes += sz.bytes
			cur.msgs += sz.msgs
			w.written[p] = cur
		}
		w.mu.Unlock()
	}
	// Finals still waiting for a record that never came.
	w.dropped.Add(int64(len(w.early)))
}

func (w *Writer) apply(open, touched map[key]*Delivery, order []key, e event) []key {
	k := key{e.project, e.d.ID}
	now := time.Now().UTC()
	var d *Delivery
	if e.op != 'r' && e.op != 's' {
		// Tries, waits and ends are of a delivery recorded and still open.
		if d = open[k]; d == nil {
			w.dropped.Add(1)
			return order
		}
	}
	switch e.op {
	case 'r':
		nd := e.d
		if nd.State == "" {
			nd.State = StatePending
		}
		if nd.CreatedAt.IsZero() {
			nd.CreatedAt = now
		}
		nd.UpdatedAt = now
		if _, ok := open[k]; !ok && len(open) >= w.cfg.InFlight {
			w.dropped.Add(1)
			return order
		}
		d = &nd
		open[k] = d
	case 'a':
		if e.attempt.At.IsZero() {
			e.attempt.At = now
		}
		d.Attempts++
		d.NextAttemptAt = time.Time{}
		d.StatusCode, d.Error, d.LatencyMS = e.attempt.StatusCode, e.attempt.Error, e.attempt.LatencyMS
		if e.answer != nil {
			d.Answer, d.AnswerTruncated = e.answer, e.trunc
		}
		d.AttemptLog = append(d.AttemptLog, e.attempt)
		if len(d.AttemptLog) > MaxAttempts {
			// The first and latest tries say most; the middle ones are dropped.
			d.AttemptLog = append(d.AttemptLog[:1], d.AttemptLog[2:]...)
		}
		// A failed try is followed by another (or by Finish, in the same round as a rule):
		// the console shows it retrying while the next one waits, not pending.
		if d.Attempts > 1 || e.attempt.Error != "" {
			d.State = StateRetrying
		}
		d.UpdatedAt = now
	case 'n':
		d.NextAttemptAt = e.d.NextAttemptAt
		d.UpdatedAt = now
	case 'f':
		delete(open, k)
		d.NextAttemptAt = time.Time{}
		d.State = e.final.State
		if e.final.Answer != nil {
			d.Answer, d.AnswerTruncated = e.final.Answer, e.trunc
		}
		d.DeadLetterSeq = e.final.DeadLetterSeq
		if e.final.Error != "" {
			d.Error = capString(e.final.Error, MaxError)
		}
		d.UpdatedAt = now
	case 'x':
		delete(open, k)
		d.NextAttemptAt = time.Time{}
		d.Error = e.d.Error
		d.UpdatedAt = now
	case 's':
		// A finished delivery is not open: it is written back whole, as read.
		nd := e.d
		nd.UpdatedAt = now
		d = &nd
	}
	if _, ok := touched[k]; !ok {
		order = append(order, k)
	}
	touched[k] = d
	if f, ok := w.early[k]; ok && e.op == 'r' {
		delete(w.early, k)
		order = w.apply(open, touched, order, f.e)
	}
	return order
}

// msgSize is about what the stream stores for m (its subject, headers and data, and a
// record's overhead).
func msgSize(m *nats.Msg) int {
	n := len(m.Subject) + len(m.Data) + 32
	for k, vs := range m.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// trimLoop purges, for each project written since the last round, its deliveries beyond
// its bounds (oldest first). nats-server has no per-subject-filter byte limit; a purge
// with keep over the project's subjects is what bounds each project's share.
func (w *Writer) trimLoop() {
	defer close(w.trimDone)
	t := time.NewTicker(w.cfg.TrimInterval)
	defer t.Stop()
	for {
		select {
		case <-w.stopTrim:
			return
		case <-t.C:
			w.Trim(context.Background())
		}
	}
}

// Trim purges, of each project published since the last Trim, the oldest deliveries
// beyond MaxPerProject, or beyond what MaxBytesPerProject holds at the average size of
// its messages published since (an estimate: the stream counts messages per subject,
// not bytes). It counts in RetentionCut a stream found full with its oldest delivery
// younger than its max age.
func (w *Writer) Trim(ctx context.Context) {
	w.mu.Lock()
	projects := w.written
	w.written = map[string]written{}
	w.mu.Unlock()
	if len(projects) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := w.js.Stream(ctx, StreamName)
	if err != nil {
		w.failed.Add(1)
		return
	}
	if info := s.CachedInfo(); info != nil && retentionCut(info, time.Now()) {
		w.cut.Add(1)
	}
	for p, sz := range projects {
		keep := int64(w.cfg.MaxPerProject)
		if w.cfg.MaxBytesPerProject > 0 && sz.msgs > 0 && sz.bytes > 0 {
			avg := max(sz.bytes/sz.msgs, 1)
			keep = max(min(keep, w.cfg.MaxBytesPerProject/avg), 1)
		}
		if err := s.Purge(ctx, jetstream.WithPurgeSubject(SubjectPrefix+"."+p+".*"), jetstream.WithPurgeKeep(uint64(keep))); err != nil {
			w.failed.Add(1)
		}
	}
}

// retentionCut says whether the stream is full (within 1% of its max bytes, where
// discard-old keeps it once it discards) while its oldest message is younger than its
// max age by more than an hour (the margin age expiry runs with).
func retentionCut(info *jetstream.StreamInfo, now time.Time) bool {
	c, st := info.Config, info.State
	if c.MaxBytes <= 0 || c.MaxAge <= 0 || st.Msgs == 0 || st.Bytes < uint64(c.MaxBytes-c.MaxBytes/100) {
		return false
	}
	return st.FirstTime.After(now.Add(-c.MaxAge + time.Hour))
}
