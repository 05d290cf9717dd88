package delivery

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
)

// Log is an exporter's side of the delivery log: the writer every call and sink
// delivery reports to, the ledger for destination and replay counts, and the replay
// loop. A nil *Log (delivery_log.enabled false) does nothing.
type Log struct {
	cfg    *Settings
	js     jetstream.JetStream
	logger *zap.Logger
	w      *deliverylog.Writer

	mu     sync.Mutex
	ledger *deliverylog.Ledger
	reader *deliverylog.Reader

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// logLinger lets a call that is answered quickly (most are) be one message in the log
// instead of one per state change, and lets the writer sleep instead of waking for every
// event: the log's cost on the hot path is mostly the writer's and the NATS server's
// work per message. The console sees a change this much later. logBuffer holds a
// linger's events (three per delivery) at about 25,000 deliveries/s; past that, log
// detail is dropped and counted, never a delivery.
const (
	logLinger = 100 * time.Millisecond
	logBuffer = 8192
)

// setupTimeout bounds each try of the background setup and each lazy ledger open.
const setupTimeout = 5 * time.Second

// startLog creates the writer at once (it never waits on NATS: while the stream is not
// there its publishes fail and are counted) and sets up the streams, the ledger and the
// replay loop in the background, retrying until NATS answers, so a NATS that is away at
// Start does not stop the collector.
func startLog(cfg *Settings, js jetstream.JetStream, logger *zap.Logger, replay func(context.Context, jetstream.Consumer)) *Log {
	if !cfg.DeliveryLog.Enabled {
		return nil
	}
	l := &Log{cfg: cfg, js: js, logger: logger,
		w: deliverylog.NewWriter(js, deliverylog.WriterConfig{
			MaxPerProject: cfg.DeliveryLog.MaxPerProject, MaxBytesPerProject: cfg.DeliveryLog.MaxBytesPerProject, Linger: logLinger, Buffer: logBuffer})}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		cons, err := backoff.Retry(ctx, func() (jetstream.Consumer, error) {
			// A try is not cut short by Shutdown (which waits for it): a stream creation
			// abandoned halfway would leave the server finishing it while it shuts down.
			tctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
			defer cancel()
			return l.setup(tctx)
		}, backoff.WithBackOff(backoff.NewExponentialBackOff()), backoff.WithMaxElapsedTime(0),
			backoff.WithNotify(func(err error, wait time.Duration) {
				logger.Warn("delivery log not set up yet; calls are made as usual, their log entries are lost until it is",
					zap.Error(err), zap.Duration("retry_in", wait))
			}))
		if err != nil || cons == nil {
			return
		}
		replay(ctx, cons)
	}()
	return l
}

// setup ensures the log's stream, the ledger and the replay queue; it returns the
// replay consumer, nil when replays are off.
func (l *Log) setup(ctx context.Context) (jetstream.Consumer, error) {
	l.mu.Lock()
	have := l.reader != nil
	l.mu.Unlock()
	if !have {
		s, err := deliverylog.EnsureStream(ctx, l.js, deliverylog.StoreConfig{
			MaxBytes: l.cfg.DeliveryLog.Stream.MaxBytes, Replicas: l.cfg.LogReplicas()})
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		l.reader = deliverylog.NewReader(s)
		l.mu.Unlock()
	}
	if _, err := l.openLedger(ctx); err != nil {
		return nil, err
	}
	if !l.cfg.DeliveryLog.Replay.Enabled {
		return nil, nil
	}
	s, err := deliverylog.EnsureReplayStream(ctx, l.js, l.cfg.LogReplicas())
	if err != nil {
		return nil, err
	}
	return deliverylog.EnsureReplayConsumer(ctx, s, replayAckWait)
}

// openLedger returns the ledger, opening it now when the background setup has not yet:
// a count is not lost to a race at start.
func (l *Log) openLedger(ctx context.Context) (*deliverylog.Ledger, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ledger != nil {
		return l.ledger, nil
	}
	led, err := deliverylog.OpenLedger(ctx, l.js, time.Second)
	if err != nil {
		return nil, err
	}
	l.ledger = led
	return led, nil
}

// Reader reads the log; nil until the background setup has opened it.
func (l *Log) Reader() *deliverylog.Reader {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reader
}

// AddDestination counts a sink delivery in the ledger; a replay's is none of the
// destination cursor's results (deliverylog.AddReplayedDestination). seq is the result's
// output sequence, by which a dead letter that comes again is counted once. An error means a
// dead letter of the cursor's could not be counted: the caller must not ack the result
// (acked, it would show as delivered in figures said to be exact). A delivery's count is
// never an error: the delivered figure is derived from the cursor.
func (l *Log) AddDestination(ctx context.Context, project, sink string, seq uint64, delivered, replay bool) error {
	if l == nil {
		return nil
	}
	led, err := l.LedgerNow(ctx)
	if err != nil {
		if delivered || replay {
			return nil
		}
		return fmt.Errorf("the ledger is not open to count the dead letter: %w", err)
	}
	if replay {
		if delivered {
			led.AddReplayedDestination(project, sink, deliverylog.Counters{Delivered: 1}, deliverylog.Destination{Delivered: 1})
		} else {
			led.AddReplayedDestination(project, sink, deliverylog.Counters{SinkDeadLettered: 1}, deliverylog.Destination{DeadLettered: 1})
		}
		return nil
	}
	if delivered {
		return led.AddDestinationResult(project, sink, seq, deliverylog.Counters{Delivered: 1}, deliverylog.Destination{Delivered: 1})
	}
	return led.AddDestinationResult(project, sink, seq, deliverylog.Counters{SinkDeadLettered: 1}, deliverylog.Destination{DeadLettered: 1})
}

// LedgerNow returns the ledger, opening it now if need be; an error means a count is lost.
func (l *Log) LedgerNow(ctx context.Context) (*deliverylog.Ledger, error) {
	if l == nil {
		return nil, errors.New("the delivery log is off")
	}
	l.mu.Lock()
	led := l.ledger
	l.mu.Unlock()
	if led != nil { // the usual case: no timer per delivery
		return led, nil
	}
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	led, err := l.openLedger(ctx)
	if err != nil {
		l.logger.Debug("ledger not open; a count is lost", zap.Error(err))
	}
	return led, err
}

func (l *Log) Record(project string, d deliverylog.Delivery) {
	if l != nil {
		l.w.Record(project, d)
	}
}

func (l *Log) attempt(project, id string, a deliverylog.Attempt, answer []byte) {
	if l != nil {
		l.w.Attempt(project, id, a, answer)
	}
}

func (l *Log) nextAttempt(project, id string, at time.Time) {
	if l != nil {
		l.w.NextAttempt(project, id, at)
	}
}

func (l *Log) Finish(project, id string, f deliverylog.Final) {
	if l != nil {
		l.w.Finish(project, id, f)
	}
}

func (l *Log) Superseded(project string, old deliverylog.Delivery, by string) {
	if l != nil {
		l.w.Superseded(project, old, by)
	}
}

func (l *Log) Abandon(project, id, reason string) {
	if l != nil {
		l.w.Abandon(project, id, reason)
	}
}

// close stops the setup and the replay loop, then publishes what the writer holds and
// flushes the ledger, within ctx.
func (l *Log) close(ctx context.Context) error {
	if l == nil {
		return nil
	}
	l.cancel()
	l.wg.Wait()
	ctx, cancel := context.WithTimeout(ctx, closeTimeout)
	defer cancel()
	err := l.w.Close(ctx)
	l.mu.Lock()
	led := l.ledger
	l.mu.Unlock()
	if led != nil {
		if lerr := led.Close(ctx); err == nil {
			err = lerr
		}
	}
	return err
}

// closeTimeout bounds what Shutdown waits for the log: a NATS that is away must not
// hold the collector's shutdown.
const closeTimeout = 5 * time.Second
