package deliverylog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// Counters of a project's ledger, in records unless said otherwise. The equation the
// ledger proves is received = dropped + agent_calls + dead_lettered + pending +
// incident_events (0 outside incident mode).
type Counters struct {
	// Received is the raw stream's records since the ledger began (View fills it from the
	// stream's last sequence, so it is exact whatever process stored them).
	Received int64 `json:"received"`
	// Dropped: records the pipeline settled without sending them: the trigger did not
	// select them (in window mode they may still be in later calls' windows), or a
	// guardrail held them back (those are Suppressed too).
	Dropped int64 `json:"dropped"`
	// Suppressed: the part of Dropped a cooldown or call budget held back.
	Suppressed int64 `json:"suppressed"`
	// AgentCalls: records the agent took (in window mode, one per call: its trigger).
	AgentCalls int64 `json:"agent_calls"`
	// DeadLettered: records of agent calls that were dead-lettered and not replayed since.
	DeadLettered int64 `json:"dead_lettered"`
	// Pending: records not settled yet (View fills it from the pipeline's consumer).
	Pending int64 `json:"pending"`
	// IncidentEvents: records that joined an incident (incident mode). No call carries
	// them one by one: the incident's calls carry them, up to 100 new events each.
	IncidentEvents int64 `json:"incident_events"`
	// IncidentsOpened counts incidents opened (not reopened), IncidentCalls the incident
	// calls made (delivered or dead-lettered; they are in Calls and CallsDeadLettered too).
	IncidentsOpened int64 `json:"incidents_opened"`
	IncidentCalls   int64 `json:"incident_calls"`
	// Calls and CallsDeadLettered count HTTP calls, not records.
	Calls             int64 `json:"calls"`
	CallsDeadLettered int64 `json:"calls_dead_lettered"`
	// Results the agent posted; Unmatched those naming a request id never issued to the
	// project.
	Results   int64 `json:"results"`
	Unmatched int64 `json:"unmatched"`
	// Delivered and SinkDeadLettered are result deliveries to destinations, all together.
	Delivered        int64 `json:"delivered"`
	SinkDeadLettered int64 `json:"sink_dead_lettered"`
	// Replayed counts deliveries sent again by a replay.
	Replayed int64 `json:"replayed"`
}

func (c *Counters) add(o Counters) {
	c.Received += o.Received
	c.Dropped += o.Dropped
	c.Suppressed += o.Suppressed
	c.AgentCalls += o.AgentCalls
	c.DeadLettered += o.DeadLettered
	c.Pending += o.Pending
	c.IncidentEvents += o.IncidentEvents
	c.IncidentsOpened += o.IncidentsOpened
	c.IncidentCalls += o.IncidentCalls
	c.Calls += o.Calls
	c.CallsDeadLettered += o.CallsDeadLettered
	c.Results += o.Results
	c.Unmatched += o.Unmatched
	c.Delivered += o.Delivered
	c.SinkDeadLettered += o.SinkDeadLettered
	c.Replayed += o.Replayed
}

// Destination counts one destination's deliveries.
type Destination struct {
	Delivered    int64 `json:"delivered"`
	DeadLettered int64 `json:"dead_lettered"`
	// Pending is filled by View from the destination's consumer.
	Pending int64 `json:"pending"`
	// Results, Since and Exact are filled by View: when Exact, the figures are derived
	// from the destination's cursor (destination.go) and run from Since, when it
	// started, and Results is what was owed since then (= delivered + dead_lettered +
	// pending); else they are the counts sink processes wrote, each once a second, which
	// miss the last second of a process that was killed.
	Results int64      `json:"results,omitempty"`
	Since   *time.Time `json:"since,omitempty"`
	Exact   bool       `json:"exact"`
	// ApproximateReason says why figures are not exact: ApproxStartUnknown (counted,
	// no cursor start recorded yet) or ApproxResultsRemoved (derived, but the output
	// stream removed results before this destination settled them, which count in
	// delivered; since ApproximateSince).
	ApproximateReason string     `json:"approximate_reason,omitempty"`
	ApproximateSince  *time.Time `json:"approximate_since,omitempty"`
}

// LedgerBucket holds one key per project.
const LedgerBucket = "svc-ledger"

// doc is a project's entry in the bucket.
type doc struct {
	Counters
	Destinations map[string]Destination `json:"destinations,omitempty"`
	// Settled are the raw sequences already counted, as sorted, disjoint, inclusive
	// intervals: a batch redelivered after a crash is not counted twice (Settle).
	Settled [][2]uint64 `json:"settled,omitempty"`
	// Base is the raw sequence before the lowest one this ledger counted (lowered when
	// an earlier batch settles after a later one): records stored before the ledger
	// existed are not in Received.
	Base uint64 `json:"base"`
}

// maxIntervals bounds Settled: batches settle nearly in order, so it holds a few
// intervals; past the bound the two lowest are joined.
const maxIntervals = 4096

// Ledger keeps the projects' counters in a KV bucket: Settle writes at once (the
// pipeline's counts must survive a crash exactly), Add accumulates in memory and flushes
// once per interval. Every write is a compare-and-set, so processes add up exactly.
type Ledger struct {
	kv      jetstream.KeyValue
	js      jetstream.JetStream // reads destination cursors' ack floors (deadLettered)
	mu      sync.Mutex
	pending map[string]delta
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once

	// last caches each project's entry as this process last wrote it, so a Settle in a
	// project only this process writes costs one round trip (the update), not two.
	cmu  sync.Mutex
	last map[string]cached
}

type delta struct {
	c     Counters
	dests map[string]Destination
}

type cached struct {
	b   []byte
	rev uint64
}

// OpenLedger creates the bucket if needed and starts the flush loop.
func OpenLedger(ctx context.Context, js jetstream.JetStream, interval time.Duration) (*Ledger, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: LedgerBucket, History: 1})
	if err != nil {
		return nil, err
	}
	if interval <= 0 {
		interval = time.Second
	}
	l := &Ledger{kv: kv, js: js, pending: map[string]delta{}, stop: make(chan struct{}), done: make(chan struct{}), last: map[string]cached{}}
	go func() {
		defer close(l.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				_ = l.Flush(context.Background())
			case <-l.stop:
				return
			}
		}
	}()
	return l, nil
}

// Add counts c for project; it costs a map update under a mutex.
func (l *Ledger) Add(project string, c Counters) { l.add(project, c, "", Destination{}) }

// AddDestination counts a destination's deliveries (and c for the project). A dead
// letter is also written at once to the destination's cursor entry, from which View
// derives the delivered figure (destination.go); the caller acknowledges the result
// only when this returns nil. An error means the dead letter is not counted: acked
// anyway, the result would show as delivered while the figures say exact, so it must
// be delivered again instead (and dead-lettered again, counted then). Nothing is added
// to the counted figures then either.
func (l *Ledger) AddDestination(project, sink string, c Counters, d Destination) error {
	return l.AddDestinationResult(project, sink, 0, c, d)
}

// AddDestinationResult is AddDestination for the result at output sequence seq: its
// dead letter is counted in the cursor's figures once however often it comes again.
func (l *Ledger) AddDestinationResult(project, sink string, seq uint64, c Counters, d Destination) error {
	if !validToken(sink) || !validToken(project) {
		return ErrInvalidID
	}
	if d.DeadLettered > 0 {
		if err := l.deadLettered(project, sink, seq); err != nil {
			return fmt.Errorf("the dead letter cannot be counted in the ledger: %w", err)
		}
	}
	l.add(project, c, sink, d)
	return nil
}

// AddReplayedDestination counts a replayed delivery to a destination: like
// AddDestination, but a replay is none of the cursor's results, so the figures derived
// from the cursor are left as they are.
func (l *Ledger) AddReplayedDestination(project, sink string, c Counters, d Destination) {
	if !validToken(sink) || !validToken(project) {
		return
	}
	l.add(project, c, sink, d)
}

func (l *Ledger) add(project string, c Counters, sink string, d Destination) {
	if !validToken(project) {
		return
	}
	l.mu.Lock()
	p := l.pending[project]
	p.c.add(c)
	if sink != "" {
		addDestination(&p.dests, sink, d)
	}
	l.pending[project] = p
	l.mu.Unlock()
}

// addDestination adds d's deliveries and dead letters to (*m)[sink], making the map when
// there is none.
func addDestination(m *map[string]Destination, sink string, d Destination) {
	if *m == nil {
		*m = map[string]Destination{}
	}
	cur := (*m)[sink]
	cur.Delivered += d.Delivered
	cur.DeadLettered += d.DeadLettered
	(*m)[sink] = cur
}

// addTo adds the delta to a project's counters and destinations.
func (dl delta) addTo(c *Counters, dests *map[string]Destination) {
	c.add(dl.c)
	for s, v := range dl.dests {
		addDestination(dests, s, v)
	}
}

// Flush writes what was added since the last flush; what fails is kept for the next.
func (l *Ledger) Flush(ctx context.Context) error {
	return streams.FlushPending(&l.mu, &l.pending, func(p string, dl delta) error {
		return l.update(ctx, p, func(d *doc) bool {
			dl.addTo(&d.Counters, &d.Destinations)
			return true
		})
	}, func(failed, newer delta) delta {
		failed.addTo(&newer.c, &newer.dests)
		return newer
	})
}

// Settle counts a pipeline batch before it is acknowledged: each raw sequence of seqs
// not counted before is sent, dead-lettered (as o says) or dropped, and the calls o
// made are added. It returns once the ledger has stored it, so a crash after it cannot
// lose the counts, and a redelivery of the batch after a crash before the ack does not
// count its records again.
func (l *Ledger) Settle(ctx context.Context, project string, seqs []uint64, o *Outcome) error {
	if !validToken(project) {
		return ErrInvalidID
	}
	return l.update(ctx, project, func(d *doc) bool {
		var c Counters
		var fresh []uint64
		for _, s := range seqs {
			if s == 0 || settled(d.Settled, s) {
				continue
			}
			fresh = append(fresh, s)
			switch o.outcome(s) {
			case outcomeSent:
				c.AgentCalls++
			case outcomeDeadLettered:
				c.DeadLettered++
			case outcomeSuppressed:
				c.Dropped++
				c.Suppressed++
			case outcomeIncident:
				c.IncidentEvents++
			default:
				c.Dropped++
			}
		}
		if len(fresh) == 0 {
			return false
		}
		// Base follows the lowest sequence ever counted, whatever order batches settle
		// in: with several pipeline processes a later batch can settle first, and a Base
		// fixed by it would leave the earlier batch counted but outside Received forever.
		// Dedupe stays exact: what was counted is in Settled, whatever Base says.
		if lo := minSeq(fresh) - 1; len(d.Settled) == 0 || lo < d.Base {
			d.Base = lo
		}
		calls, callsDL := o.calls()
		c.Calls, c.CallsDeadLettered = int64(calls), int64(callsDL)
		c.IncidentsOpened = int64(o.incidentsOpened())
		d.add(c)
		d.Settled = addSeqs(d.Settled, fresh)
		return true
	})
}

// update applies fn to the project's entry with compare-and-set, retrying on conflict;
// fn returns false when there is nothing to write. It starts from the entry as this
// process last wrote it, when it has.
func (l *Ledger) update(ctx context.Context, project string, fn func(*doc) bool) error {
	var opts []streams.KVOption
	l.cmu.Lock()
	if c, ok := l.last[project]; ok {
		opts = append(opts, streams.KVAssume(c.b, c.rev))
	}
	l.cmu.Unlock()
	var written []byte
	rev, err := streams.UpdateKV(ctx, l.kv, project, func(old []byte, exists bool) ([]byte, error) {
		written = nil
		var d doc
		if exists {
			if err := json.Unmarshal(old, &d); err != nil {
				return nil, err
			}
		}
		if !fn(&d) {
			return nil, streams.ErrKVUnchanged
		}
		var err error
		written, err = json.Marshal(d)
		return written, err
	}, append(opts, streams.KVAttempts(100))...)
	if err != nil || written == nil {
		return err
	}
	l.cmu.Lock()
	l.last[project] = cached{b: written, rev: rev}
	l.cmu.Unlock()
	return nil
}

// Close flushes and stops.
func (l *Ledger) Close(ctx context.Context) error {
	l.once.Do(func() { close(l.stop) })
	<-l.done
	return l.Flush(ctx)
}

// settled reports whether s is in the sorted intervals.
func settled(iv [][2]uint64, s uint64) bool {
	lo, hi := 0, len(iv)
	for lo < hi {
		m := (lo + hi) / 2
		switch {
		case s < iv[m][0]:
			hi = m
		case s > iv[m][1]:
			lo = m + 1
		default:
			return true
		}
	}
	return false
}

func minSeq(s []uint64) uint64 {
	m := s[0]
	for _, v := range s[1:] {
		m = min(m, v)
	}
	return m
}

// addSeqs merges seqs (not in iv) into the intervals, keeping them sorted and disjoint.
func addSeqs(iv [][2]uint64, seqs []uint64) [][2]uint64 {
	for _, s := range seqs {
		// Find the first interval that ends at or after s-1.
		i := 0
		lo, hi := 0, len(iv)
		for lo < hi {
			m := (lo + hi) / 2
			if iv[m][1]+1 < s {
				lo = m + 1
			} else {
				hi = m
			}
		}
		i = lo
		switch {
		case i < len(iv) && iv[i][0] <= s && s <= iv[i][1]:
			// already in
		case i < len(iv) && iv[i][1]+1 == s:
			iv[i][1] = s
			if i+1 < len(iv) && iv[i+1][0] == s+1 {
				iv[i][1] = iv[i+1][1]
				iv = append(iv[:i+1], iv[i+2:]...)
			}
		case i < len(iv) && iv[i][0] == s+1:
			iv[i][0] = s
		default:
			iv = append(iv, [2]uint64{})
			copy(iv[i+1:], iv[i:])
			iv[i] = [2]uint64{s, s}
		}
	}
	for len(iv) > maxIntervals {
		iv[1][0] = iv[0][0]
		iv = iv[1:]
	}
	return iv
}

// ReplayedBucket marks dead-lettered agent calls whose records a replay delivered, for as
// long as the log keeps them (a replay names a delivery the log still has).
const ReplayedBucket = "svc-ledger-replayed"

// Replayed moves the records of dead-lettered agent call id (a replay of it delivered
// them) from dead_lettered to agent_calls, once: a second successful replay of the same
// call, or a job run twice, moves nothing more, so the equation keeps holding.
func (l *Ledger) Replayed(ctx context.Context, js jetstream.JetStream, project, id string, records int) error {
	if !validToken(project) || !validToken(id) {
		return ErrInvalidID
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: ReplayedBucket, History: 1, TTL: Retention + 24*time.Hour})
	if err != nil {
		return err
	}
	if _, err := kv.Create(ctx, project+"."+id, nil); errors.Is(err, jetstream.ErrKeyExists) {
		return nil
	} else if err != nil {
		return err
	}
	n := int64(records)
	return l.update(ctx, project, func(d *doc) bool {
		d.DeadLettered -= n
		d.AgentCalls += n
		return true
	})
}
