package deliverylog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Stream and subject names.
const (
	StreamName    = "svc-deliveries"
	SubjectPrefix = "svc-deliveries"
	Retention     = 7 * 24 * time.Hour
)

// StoreConfig bounds the shared stream.
type StoreConfig struct {
	MaxBytes int64         // whole log, discard old; 0 means 8 GiB
	MaxAge   time.Duration // 0 means Retention
	Replicas int
}

// EnsureStream creates or updates the shared delivery stream.
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfg StoreConfig) (jetstream.Stream, error) {
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = 8 << 30
	}
	if cfg.MaxAge == 0 {
		cfg.MaxAge = Retention
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	return js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:              StreamName,
		Subjects:          []string{SubjectPrefix + ".*.*"},
		MaxMsgsPerSubject: 1,
		MaxAge:            cfg.MaxAge,
		MaxBytes:          cfg.MaxBytes,
		Discard:           jetstream.DiscardOld,
		Replicas:          cfg.Replicas,
		AllowDirect:       true,
	})
}

func subject(project, id string) string { return SubjectPrefix + "." + project + "." + id }

// Reader answers the console's questions, always within one project.
type Reader struct{ s jetstream.Stream }

// NewReader reads the stream EnsureStream made.
func NewReader(s jetstream.Stream) *Reader { return &Reader{s: s} }

// Get returns one delivery of project with its attempt log and bodies.
func (r *Reader) Get(ctx context.Context, project, id string) (Delivery, error) {
	var d Delivery
	if !validToken(project) || !validToken(id) {
		return d, ErrInvalidID
	}
	m, err := r.s.GetLastMsgForSubject(ctx, subject(project, id))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return d, ErrNotFound
	}
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(m.Data, &d); err != nil {
		return d, fmt.Errorf("deliverylog: %w", err)
	}
	return d, nil
}

// GetMany returns the deliveries of project among ids that exist (for replay).
func (r *Reader) GetMany(ctx context.Context, project string, ids []string) ([]Delivery, error) {
	var out []Delivery
	for _, id := range ids {
		d, err := r.Get(ctx, project, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// List returns the deliveries of project matching f, newest first (by creation).
//
// A delivery's latest state is its only message, written when it last changed, so every
// delivery created since a moment has its message after that moment. List reads the
// project's messages of a recent window first (15 minutes) and widens it (to an hour, a
// day, the whole retention) only while the window holds fewer matching deliveries
// created inside it than asked for: a console read of a busy project costs its last
// minutes, not its week. f.Since, when set, is the window.
func (r *Reader) List(ctx context.Context, project string, f Filter) ([]Delivery, error) {
	f = f.normalized()
	return r.list(ctx, project, f, f.Limit)
}

// ListForReplay is List with up to MaxReplay answers.
func (r *Reader) ListForReplay(ctx context.Context, project string, f Filter) ([]Delivery, error) {
	return r.list(ctx, project, f, MaxReplay)
}

var listWindows = []time.Duration{15 * time.Minute, time.Hour, 24 * time.Hour, Retention + time.Hour}

func (r *Reader) list(ctx context.Context, project string, f Filter, limit int) ([]Delivery, error) {
	if !validToken(project) {
		return nil, ErrInvalidID
	}
	now := time.Now()
	windows := listWindows
	if !f.Since.IsZero() {
		windows = []time.Duration{now.Sub(f.Since)}
	}
	var out []Delivery
	for _, w := range windows {
		from := now.Add(-w)
		ds, err := r.scan(ctx, project, from, func(d Delivery) bool { return f.match(d) }, nil, 0)
		if err != nil {
			return nil, err
		}
		out = ds
		inside := 0
		for _, d := range ds {
			if !d.CreatedAt.Before(from) {
				inside++
			}
		}
		if inside >= limit {
			break
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.After(out[j].CreatedAt)
		}
		return out[i].ID > out[j].ID
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// scan reads the project's deliveries written since from (all when zero) with an
// ordered consumer (ephemeral, nothing durable per read), keeping those keep accepts,
// without their bodies and attempt logs. It stops after a delivery stop accepts, or
// after max messages when max > 0.
func (r *Reader) scan(ctx context.Context, project string, from time.Time, keep, stop func(Delivery) bool, max uint64) ([]Delivery, error) {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{SubjectPrefix + "." + project + ".*"}}
	if !from.IsZero() {
		cfg.DeliverPolicy = jetstream.DeliverByStartTimePolicy
		t := from
		cfg.OptStartTime = &t
	}
	c, err := r.s.OrderedConsumer(ctx, cfg)
	if err != nil {
		return nil, err
	}
	pending := c.CachedInfo().NumPending
	if max > 0 {
		pending = min(pending, max)
	}
	var out []Delivery
	for got := uint64(0); got < pending; {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		batch, err := c.Fetch(int(min(256, pending-got)), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			var d Delivery
			if json.Unmarshal(m.Data(), &d) != nil {
				continue
			}
			if keep(d) {
				d.RequestBody, d.Answer, d.AttemptLog = nil, nil, nil
				out = append(out, d)
				if stop != nil && stop(d) {
					return out, nil
				}
			}
		}
		if batch.Error() != nil {
			return nil, batch.Error()
		}
		if n == 0 {
			break
		}
		got += uint64(n)
	}
	return out, nil
}
