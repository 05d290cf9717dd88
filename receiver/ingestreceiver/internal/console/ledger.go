package console

import (
	"context"
	"math"
	"net/url"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
)

// GET /console/v1/projects/{project_id}/ledger: the project's counts
// (docs/contract.md#section-11: received, dropped, agent_calls, results, delivered, dead_lettered, pending) and
// the rest of deliverylog.LedgerView (calls, unmatched, destinations, balanced,
// unaccounted, incident_events, incidents_opened, incident_calls...), received and
// pending read from the streams now, and events_per_call in incident mode.

// ledgerAnswer is the ledger as the console shows it.
type ledgerAnswer struct {
	deliverylog.LedgerView
	// EventsPerCall is incident_events / incident_calls: how many events one incident
	// call stood for, the grouping incident mode buys. Absent before the first call.
	EventsPerCall *float64 `json:"events_per_call,omitempty"`
}

func newLedgerAnswer(v deliverylog.LedgerView) ledgerAnswer {
	a := ledgerAnswer{LedgerView: v}
	if v.IncidentCalls > 0 {
		// Two decimals are all a person reads of a ratio.
		r := math.Round(float64(v.IncidentEvents)/float64(v.IncidentCalls)*100) / 100
		a.EventsPerCall = &r
	}
	return a
}

// Defaults of the durable names, as the collector's configs name them.
const (
	DefaultPipelineDurable = "svc-pipeline"
	DefaultSinkDurable     = "svc-sink"
)

func (a *API) ledgerEndpoint() endpoint {
	return endpoint{name: "ledger", parse: query(func(url.Values) (readFunc, *apierror.Error) {
		return func(ctx context.Context, js jetstream.JetStream, projectID string) (any, error) {
			v, err := deliverylog.View(ctx, js, projectID, deliverylog.ViewOptions{
				PipelineDurable: orDefault(a.set.PipelineDurable, DefaultPipelineDurable),
				SinkDurable:     orDefault(a.set.SinkDurable, DefaultSinkDurable),
				Sinks:           a.enabledSinks(projectID),
			})
			if err != nil {
				return nil, err
			}
			return newLedgerAnswer(v), nil
		}, nil
	})}
}

// enabledSinks are the project's destinations that receive results now, per the mirror.
func (a *API) enabledSinks(projectID string) []string {
	cache := a.set.Auth.MirrorCache()
	if cache == nil {
		return nil
	}
	p, ok := cache.Project(projectID)
	if !ok {
		return nil
	}
	var ids []string
	for _, s := range p.Sinks {
		if s.Enabled {
			ids = append(ids, s.ID)
		}
	}
	return ids
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
