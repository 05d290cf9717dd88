package deliverylog

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The replay queue: the console (in the ingest receiver) asks for deliveries to be sent
// again; whichever agent exporter is running takes each job once (a work queue with one
// durable consumer shared by every exporter process) and sends it as a new delivery.
// One shared stream for every project, for the reason the log is one stream (doc.go).
const (
	ReplayStream  = "svc-replays"
	ReplayPrefix  = "svc-replays"
	ReplayDurable = "svc-replayer"
	// MaxReplay bounds one replay request.
	MaxReplay = 1000
)

// Job is one delivery to send again.
type Job struct {
	Project    string `json:"project"`
	DeliveryID string `json:"delivery_id"`
	// ReplayID names the replay request, so the same request posted twice (a client
	// retrying) is one job per delivery.
	ReplayID string `json:"replay_id"`
	// Bulk marks a job of a replay of all dead letters: the same delivery queued by two
	// bulk replays within the queue's duplicate window is one job (the mark that it was
	// replayed, Delivery.ReplayedBy, lands only once the job has run).
	Bulk        bool      `json:"bulk,omitempty"`
	RequestedBy string    `json:"requested_by,omitempty"`
	RequestedAt time.Time `json:"requested_at"`
}

// EnsureReplayStream creates or updates the replay queue.
func EnsureReplayStream(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.Stream, error) {
	if replicas == 0 {
		replicas = 1
	}
	return js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:       ReplayStream,
		Subjects:   []string{ReplayPrefix + ".*"},
		Retention:  jetstream.WorkQueuePolicy,
		MaxAge:     Retention,
		Replicas:   replicas,
		Duplicates: 10 * time.Minute,
	})
}

// EnsureReplayConsumer returns the queue's shared durable consumer.
func EnsureReplayConsumer(ctx context.Context, s jetstream.Stream, ackWait time.Duration) (jetstream.Consumer, error) {
	return s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       ReplayDurable,
		Description:   "otelcol-svc replays",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       ackWait,
		MaxDeliver:    -1,
		MaxAckPending: 64,
	})
}

// Enqueue stores the jobs; it returns once JetStream has every one.
func Enqueue(ctx context.Context, js jetstream.JetStream, jobs []Job) error {
	futures := make([]jetstream.PubAckFuture, 0, len(jobs))
	for _, j := range jobs {
		if !validToken(j.Project) || !validToken(j.DeliveryID) {
			return ErrInvalidID
		}
		b, err := json.Marshal(j)
		if err != nil {
			return err
		}
		m := &nats.Msg{Subject: ReplayPrefix + "." + j.Project, Data: b, Header: nats.Header{}}
		id := j.ReplayID + ":" + j.DeliveryID
		if j.Bulk {
			id = "bulk:" + j.Project + ":" + j.DeliveryID
		}
		m.Header.Set(jetstream.MsgIDHeader, id)
		f, err := js.PublishMsgAsync(m)
		if err != nil {
			return err
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("deliverylog: storing a replay: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// ParseJob reads a job from the queue.
func ParseJob(data []byte) (Job, error) {
	var j Job
	if err := json.Unmarshal(data, &j); err != nil {
		return j, err
	}
	if !validToken(j.Project) || !validToken(j.DeliveryID) {
		return j, ErrInvalidID
	}
	return j, nil
}
