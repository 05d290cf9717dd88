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

// List returns the deliveries of project matching f, newest first. It reads the
// project's subjects with an ordered consumer (ephemeral, no durable per read) from
// f.Since, so its cost is the project's deliveries in the window, bounded by retention.
func (r *Reader) List(ctx context.Context, project string, f Filter) ([]Delivery, error) {
	if !validToken(project) {
		return nil, ErrInvalidID
	}
	f = f.normalized()
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{SubjectPrefix + "." + project + ".*"}}
	if !f.Since.IsZero() {
		// Updates after Since are enough: a delivery's latest state is its only message.
		cfg.DeliverPolicy = jetstream.DeliverByStartTimePolicy
		t := f.Since
		cfg.OptStartTime = &t
	}
	c, err := r.s.OrderedConsumer(ctx, cfg)
	if err != nil {
		return nil, err
	}
	pending := c.CachedInfo().NumPending
	var out []Delivery
	for got := uint64(0); got < pending; {
		batch, err := c.Fetch(256, jetstream.FetchMaxWait(2*time.Second))
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
			if f.match(d) {
				d.RequestBody, d.Answer, d.AttemptLog = nil, nil, nil
				out = append(out, d)
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
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.After(out[j].CreatedAt)
		}
		return out[i].ID > out[j].ID
	})
	if len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}
