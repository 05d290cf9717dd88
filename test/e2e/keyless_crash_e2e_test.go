package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// The receiver role (configs/receiver.yaml, NATS in another process) is killed with
// SIGKILL twice under unpaced load from 16 clients that retry each batch without an
// Idempotency-Key until it is answered 2xx. Nothing is lost, and
// since each request is stored whole or not at all (atomic batches), a retry duplicates
// records only when the killed process had stored the whole request and not yet
// answered: at most one whole request per kill, never the part-stored batches of every
// request in flight (3% of the records with per-record publishing).
// `make test-cluster` runs the same with 100,000 records and a kill of each role
// (TestClusterUnpacedKeylessLoadSurvivesKill9OfEachRole).
func TestKeylessRetriesAfterReceiverKill9(t *testing.T) {
	const records, batch, workers = 20_000, 100, 16
	kills := []int{records * 3 / 10, records * 65 / 100}
	e := startReceiver(t, map[string]string{"SVC_USAGE_METERING": "false"})
	key := e.project(t, "keyless")
	load := runKeylessLoad(t, key, func() string { return e.col.HTTP }, records, batch, workers)
	for _, at := range kills {
		require.Eventually(t, func() bool { return load.acked.Load() >= int64(at) }, 120*time.Second, 5*time.Millisecond,
			"the load stalled at %d records answered 2xx", load.acked.Load())
		e.col.Kill()
		t.Logf("receiver killed with %d records answered 2xx", load.acked.Load())
		e.col.Start()
	}
	load.wait(t, 180*time.Second)

	stored := countNumbers(t, e.js, streams.RawStream("keyless"), records)
	lost, dups := load.tally(stored)
	t.Logf("keyless retries, receiver killed twice under unpaced load: %d records, %d requests retried, lost %d, %d duplicates (%.3f%%)",
		records, load.retried.Load(), len(lost), dups, 100*float64(dups)/records)
	require.Empty(t, lost, "records answered 2xx (after retries) missing from the stream: %v", head(lost))
	// A duplicate needs a whole request stored and its answer cut off by the kill. The
	// receiver keeps one batch per stream at the server (atomicbatch.InFlight), and
	// only a batch whose commit was sent can be stored: at most one whole request per
	// kill. Per-record or fast-batch publishing stored part of every request in flight
	// (8% here), which shows as a request some of whose records are stored more often
	// than others: a count of duplicates alone would let a few of those through.
	part, again := requestCopies(stored, records, batch)
	assert.Empty(t, part, "requests stored in part and then again (first record of each): the retries stored part-stored requests again")
	assert.LessOrEqual(t, again, len(kills), "more requests stored twice than receiver kills")
	assert.LessOrEqual(t, dups, len(kills)*batch, "more duplicates than one whole request per kill")
}

// requestCopies splits what is stored by request (the load sends records first..first+
// batch-1 in one request, first a multiple of batch): part lists the requests whose
// records are not all stored the same number of times (by first record), again counts
// the extra copies of whole requests.
func requestCopies(stored map[int]int, records, batch int) (part []int, again int) {
	for first := 0; first < records; first += batch {
		copies := stored[first]
		for n := first + 1; n < min(first+batch, records); n++ {
			if stored[n] != copies {
				part = append(part, first)
				break
			}
		}
		again += max(copies-1, 0)
	}
	return part, again
}

// keylessLoad is a client doing the right thing against a receiver that may die under
// it: numbered records {"n": i} in batches over /v1/events/batch, unpaced, from several
// goroutines, each batch sent again (without an Idempotency-Key) until answered 2xx.
type keylessLoad struct {
	acked   atomic.Int64 // records answered 2xx
	retried atomic.Int64 // requests sent again
	records int
	done    chan struct{}
	mu      sync.Mutex
	refused []string // answers a retrying client cannot get past
}

func runKeylessLoad(t *testing.T, key string, base func() string, records, batch, workers int) *keylessLoad {
	l := &keylessLoad{records: records, done: make(chan struct{})}
	client := &http.Client{Timeout: 30 * time.Second}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				first := int(next.Add(int64(batch))) - batch
				if first >= records {
					return
				}
				var body bytes.Buffer
				body.WriteByte('[')
				for n := first; n < min(first+batch, records); n++ {
					if n > first {
						body.WriteByte(',')
					}
					body.WriteString(`{"n":` + strconv.Itoa(n) + `}`)
				}
				body.WriteByte(']')
				if !l.sendUntilStored(client, base, key, body.Bytes()) {
					return
				}
				l.acked.Add(int64(min(first+batch, records) - first))
			}
		})
	}
	go func() { wg.Wait(); close(l.done) }()
	return l
}

// sendUntilStored posts one batch until it is answered 2xx; false when it never can be.
func (l *keylessLoad) sendUntilStored(client *http.Client, base func() string, key string, body []byte) bool {
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			l.retried.Add(1)
		}
		req, _ := http.NewRequest(http.MethodPost, base()+"/v1/events/batch", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", key)
		resp, err := client.Do(req)
		if err != nil {
			// Refused while the process is down, or cut off when it died.
			time.Sleep(50 * time.Millisecond)
			continue
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case resp.StatusCode/100 == 2:
			return true
		case resp.StatusCode == http.StatusServiceUnavailable, resp.StatusCode == http.StatusTooManyRequests:
			// Retry-After is whole seconds; a quicker retry is what an impatient client
			// does, and makes the test no kinder to the receiver.
			time.Sleep(100 * time.Millisecond)
		default:
			l.mu.Lock()
			l.refused = append(l.refused, strconv.Itoa(resp.StatusCode)+" "+strings.TrimSpace(string(answer)))
			l.mu.Unlock()
			return false
		}
	}
}

// wait returns once every batch was answered 2xx.
func (l *keylessLoad) wait(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case <-l.done:
	case <-time.After(within):
		t.Fatalf("the load did not finish within %s: %d of %d records answered 2xx", within, l.acked.Load(), l.records)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	require.Empty(t, l.refused, "answers a retrying client cannot get past")
}

// tally compares what is stored with what was sent: numbers missing, and copies beyond
// the first.
func (l *keylessLoad) tally(stored map[int]int) (lost []int, dups int) {
	for n := range l.records {
		if stored[n] == 0 {
			lost = append(lost, n)
		}
	}
	return lost, duplicates(stored)
}

// countNumbers reads a stream once through (an ordered consumer: one request per batch
// of messages, not per message) and counts each record's "n".
func countNumbers(t *testing.T, js jetstream.JetStream, stream string, atLeast int) map[int]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, info.State.Msgs, uint64(atLeast), "the stream holds fewer records than were sent")
	seen := map[int]int{}
	var c jetstream.Consumer
	var last uint64 // stream sequence of the last message read
	failures := 0
	for read := uint64(0); read < info.State.Msgs; {
		if c == nil {
			// On a cluster the ephemeral consumer may not answer at once ("no
			// responders"): start again after the last message read.
			c, err = s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
				DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: last + 1})
			require.NoError(t, err)
		}
		batch, err := c.Fetch(1000, jetstream.FetchMaxWait(5*time.Second))
		if err == nil {
			for m := range batch.Messages() {
				read++
				meta, merr := m.Metadata()
				require.NoError(t, merr)
				last = meta.Sequence.Stream
				var rec struct{ N *int }
				require.NoError(t, json.Unmarshal(m.Data(), &rec), "%s", m.Data())
				require.NotNil(t, rec.N, "%s", m.Data())
				seen[*rec.N]++
			}
			err = batch.Error()
		}
		if err != nil {
			failures++
			require.Less(t, failures, 10, "reading %s: %v", stream, err)
			c = nil
			time.Sleep(200 * time.Millisecond)
		}
	}
	return seen
}

// duplicates counts the copies beyond the first of each key (deliveries, stored records).
func duplicates[K comparable](seen map[K]int) int {
	d := 0
	for _, c := range seen {
		d += max(c-1, 0)
	}
	return d
}

func head(ns []int) []int { return ns[:min(len(ns), 20)] }
