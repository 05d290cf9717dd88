package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
)

// POST /console/v1/projects/{project_id}/deliveries/replay with {"ids": [...]} or
// {"state": "dead_lettered", "kind", "since"}: each chosen delivery is queued on the
// replay queue (svc-replays) for the agent and sink exporters (each replays its own kind),
// which send it again as a new delivery naming the old one (replay_of). Only a console
// token of the project's owner or an admin may (AuthorizeConsoleWrite). Answer 202
// {"replayed": N, "skipped": [{"id", "reason"}], "replay_id"}.
//
// The same request posted again with the same Idempotency-Key (a client retrying after a
// lost answer) queues nothing new: the key names the replay, and the queue drops a job it
// already holds for that replay and delivery (JetStream's duplicate window, 10 minutes).

const (
	reasonUnknown = "no such delivery in this project (deliveries are kept for 7 days)"
	reasonBusy    = "it is still being delivered (state %s); replay it once it is delivered or dead-lettered"
	// maxIdempotencyKey bounds the Idempotency-Key header, as the receiver's other paths do.
	maxIdempotencyKey = 256
)

type skipped struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

type replayAnswer struct {
	Replayed int       `json:"replayed"`
	Skipped  []skipped `json:"skipped"`
	ReplayID string    `json:"replay_id"`
}

func (a *API) replayEndpoint() endpoint {
	return endpoint{name: "deliveries/replay", post: true, write: true, status: http.StatusAccepted, parse: func(req *http.Request) (readFunc, *apierror.Error) {
		body, err := io.ReadAll(io.LimitReader(req.Body, deliverylog.MaxReplayBody+1))
		if err != nil {
			return nil, apierror.New(http.StatusBadRequest, apierror.InvalidBody, "the body could not be read: "+err.Error())
		}
		if len(body) > deliverylog.MaxReplayBody {
			return nil, apierror.New(http.StatusRequestEntityTooLarge, apierror.PayloadTooLarge,
				fmt.Sprintf("the body is larger than %d bytes; replay at most %d deliveries per request", deliverylog.MaxReplayBody, deliverylog.MaxReplay))
		}
		rr, err := deliverylog.ParseReplayRequest(body)
		if err != nil {
			return nil, apierror.New(http.StatusBadRequest, apierror.InvalidBody, err.Error())
		}
		idem := req.Header.Get("Idempotency-Key")
		if len(idem) > maxIdempotencyKey || !printable(idem) {
			return nil, apierror.New(http.StatusBadRequest, apierror.InvalidBody,
				fmt.Sprintf("Idempotency-Key must be at most %d printable ASCII characters", maxIdempotencyKey))
		}
		addr := clientAddr(req)
		return func(ctx context.Context, js jetstream.JetStream, projectID string) (any, error) {
			return a.replay(ctx, js, projectID, rr, idem, addr)
		}, nil
	}}
}

func (a *API) replay(ctx context.Context, js jetstream.JetStream, projectID string, rr deliverylog.ReplayRequest, idem, addr string) (any, error) {
	ans := replayAnswer{Skipped: []skipped{}, ReplayID: replayID(projectID, idem)}
	chosen, err := a.chooseReplays(ctx, js, projectID, rr, &ans)
	if err != nil || len(chosen) == 0 {
		return ans, err
	}
	p, _ := principal.FromContext(ctx)
	now := time.Now().UTC()
	jobs := make([]deliverylog.Job, 0, len(chosen))
	for _, d := range chosen {
		jobs = append(jobs, deliverylog.Job{Project: projectID, DeliveryID: d.ID, ReplayID: ans.ReplayID, Bulk: rr.IDs == nil, RequestedBy: p.KeyID, RequestedAt: now})
	}
	if err := a.replays.ensure(ctx, js, a.set.ReplayReplicas); err != nil {
		return nil, err
	}
	if err := deliverylog.Enqueue(ctx, js, jobs); err != nil {
		a.replays.forget() // the queue may have been deleted: look again next time
		return nil, err
	}
	ans.Replayed = len(jobs)
	a.audit.replay(ctx, js, projectID, ans.ReplayID, addr, jobs, rr.IDs == nil, now)
	// Replays are rare and change what destinations receive: worth a line an operator
	// can find. Ids only, never bodies.
	a.set.Logger.Info("deliveries queued for replay", zap.String("project_id", projectID),
		zap.String("replay_id", ans.ReplayID), zap.String("requested_by", p.KeyID), zap.Int("deliveries", len(jobs)))
	return ans, nil
}

// chooseReplays returns the deliveries to replay and notes in ans those asked for by id
// that will not be.
func (a *API) chooseReplays(ctx context.Context, js jetstream.JetStream, projectID string, rr deliverylog.ReplayRequest, ans *replayAnswer) ([]deliverylog.Delivery, error) {
	r, err := reader(ctx, js)
	if err != nil {
		return nil, err
	}
	if rr.IDs == nil {
		if r == nil {
			return nil, nil
		}
		ds, err := r.ListForReplay(ctx, projectID, deliverylog.Filter{State: deliverylog.StateDeadLettered, Kind: rr.Kind, Since: rr.Since})
		if err != nil {
			return nil, err
		}
		// A dead letter a replay already stands for is not sent again: its replay is
		// listed (dead-lettered too, when it failed) and taken instead.
		out := ds[:0]
		for _, d := range ds {
			if d.ReplayedBy == "" {
				out = append(out, d)
			}
		}
		return out, nil
	}
	var out []deliverylog.Delivery
	for _, id := range rr.IDs {
		if r == nil {
			ans.Skipped = append(ans.Skipped, skipped{ID: id, Reason: reasonUnknown})
			continue
		}
		d, err := r.Get(ctx, projectID, id)
		switch {
		case errors.Is(err, deliverylog.ErrNotFound) || errors.Is(err, deliverylog.ErrInvalidID):
			ans.Skipped = append(ans.Skipped, skipped{ID: id, Reason: reasonUnknown})
		case err != nil:
			return nil, err
		case d.State == deliverylog.StatePending || d.State == deliverylog.StateRetrying:
			ans.Skipped = append(ans.Skipped, skipped{ID: id, Reason: fmt.Sprintf(reasonBusy, d.State)})
		default:
			out = append(out, d)
		}
	}
	return out, nil
}

// replayID names a replay request: from the client's Idempotency-Key (within the project,
// so two projects' keys never collide on the shared queue), else at random.
func replayID(projectID, idem string) string {
	if idem != "" {
		sum := sha256.Sum256([]byte(projectID + "\x00" + idem))
		return "rpl_" + hex.EncodeToString(sum[:16])
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "rpl_" + hex.EncodeToString(b[:])
}

// replayQueue creates the replay queue the first time a replay needs it. A queue that
// exists is left as it is (the exporter may have made it with more replicas).
type replayQueue struct {
	mu    sync.Mutex
	ready bool
}

func (q *replayQueue) ensure(ctx context.Context, js jetstream.JetStream, replicas int) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ready {
		return nil
	}
	_, err := js.Stream(ctx, deliverylog.ReplayStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = deliverylog.EnsureReplayStream(ctx, js, replicas)
	}
	if err != nil {
		return err
	}
	q.ready = true
	return nil
}

func (q *replayQueue) forget() {
	q.mu.Lock()
	q.ready = false
	q.mu.Unlock()
}
