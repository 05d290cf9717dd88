package deliverylog

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// LedgerView is what the console shows of a project's ledger.
type LedgerView struct {
	Counters
	Destinations map[string]Destination `json:"destinations"`
	// Balanced says whether received = dropped + agent_calls + dead_lettered + pending +
	// incident_events,
	// and every enabled destination's figures are exact;
	// Unaccounted is the difference (records in flight between a settle and its ack, or
	// records the raw stream's limits removed before the pipeline read them).
	Balanced    bool  `json:"balanced"`
	Unaccounted int64 `json:"unaccounted"`
	// Approximate names the figures that are counts processes wrote once a second, not
	// derived from the streams, and so miss the last second's of a process that was
	// killed: "unmatched" and "replayed" always, "delivered" and "sink_dead_lettered"
	// when a destination's figures are not exact (then "destinations.<id>" too).
	Approximate []string `json:"approximate"`
}

// ViewOptions name the consumers whose backlog is "pending".
type ViewOptions struct {
	// PipelineDurable is the pipeline's durable consumer on the raw stream.
	PipelineDurable string
	// SinkDurable is the sink role's durable prefix: each destination's consumer on the
	// output stream is SinkDurable + "-" + sink id.
	SinkDurable string
	// Sinks are the project's enabled destinations.
	Sinks []string
}

// View reads a project's ledger: the counters settled and added so far, received from
// the raw stream's last sequence and pending from the pipeline's consumer, both read now,
// so the equation is checked against the streams themselves rather than against counts
// that could share a mistake.
func View(ctx context.Context, js jetstream.JetStream, project string, o ViewOptions) (LedgerView, error) {
	var v LedgerView
	if !validToken(project) {
		return v, ErrInvalidID
	}
	var d doc
	kv, err := js.KeyValue(ctx, LedgerBucket)
	switch {
	case errors.Is(err, jetstream.ErrBucketNotFound):
	case err != nil:
		return v, err
	default:
		e, err := kv.Get(ctx, project)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return v, err
		default:
			if err := json.Unmarshal(e.Value(), &d); err != nil {
				return v, err
			}
		}
	}
	v.Counters, v.Destinations = d.Counters, map[string]Destination{}
	for k, dv := range d.Destinations {
		v.Destinations[k] = dv
	}
	raw, err := js.Stream(ctx, streams.RawStream(project))
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
	case err != nil:
		return v, err
	default:
		last := raw.CachedInfo().State.LastSeq
		if last > d.Base {
			v.Received = int64(last - d.Base)
		}
		if c, err := raw.Consumer(ctx, o.PipelineDurable); err == nil {
			ci := c.CachedInfo()
			v.Pending = int64(ci.NumPending) + int64(ci.NumAckPending)
		} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return v, err
		} else {
			// No pipeline consumer (no agent endpoint yet): nothing was read, all waits.
			v.Pending = v.Received - (v.Dropped + v.AgentCalls + v.DeadLettered + v.IncidentEvents)
		}
	}
	// Results are the output stream's messages ever stored (its last sequence), whatever
	// process stored them and whether or not it lived to count them: agent results,
	// and the usage notices that go to the destinations the same way.
	out, err := js.Stream(ctx, streams.OutputStream(project))
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
	case err != nil:
		return v, err
	default:
		v.Results = int64(out.CachedInfo().State.LastSeq)
	}
	v.Approximate = []string{"unmatched", "replayed"}
	destinationsExact := true
	if o.Sinks != nil {
		// The enabled destinations, each from its cursor when its start is known.
		counted := v.Destinations
		v.Destinations = map[string]Destination{}
		v.Delivered, v.SinkDeadLettered = 0, 0
		exact := true
		for _, s := range o.Sinks {
			dv := counted[s]
			dv.Exact = false
			if out != nil {
				if c, err := out.Consumer(ctx, o.SinkDurable+"-"+s); err == nil {
					ci := c.CachedInfo()
					st := out.CachedInfo().State
					if d, ok := destinationFigures(ctx, kv, project, s, ci, st.FirstSeq, st.LastSeq); ok {
						dv = d
					} else {
						dv.Pending = int64(ci.NumPending) + int64(ci.NumAckPending)
					}
				} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
					return v, err
				}
			}
			if !dv.Exact {
				if dv.ApproximateReason == "" {
					dv.ApproximateReason = ApproxStartUnknown
				}
				exact = false
				v.Approximate = append(v.Approximate, "destinations."+s)
			}
			v.Delivered += dv.Delivered
			v.SinkDeadLettered += dv.DeadLettered
			v.Destinations[s] = dv
		}
		if !exact {
			destinationsExact = false
			v.Approximate = append(v.Approximate, "delivered", "sink_dead_lettered")
		}
	} else if len(v.Destinations) > 0 {
		v.Approximate = append(v.Approximate, "delivered", "sink_dead_lettered")
	}
	v.Unaccounted = v.Received - (v.Dropped + v.AgentCalls + v.DeadLettered + v.Pending + v.IncidentEvents)
	// Never balanced while a destination's figures are counts that may miss some.
	v.Balanced = v.Unaccounted == 0 && destinationsExact
	return v, nil
}
