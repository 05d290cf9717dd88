package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/incident"
)

// GET  /console/v1/projects/{project_id}/incidents?status=open|acknowledged|resolved&limit=50
// GET  /console/v1/projects/{project_id}/incidents/{incident_id}
// POST /console/v1/projects/{project_id}/incidents/{incident_id}/{acknowledge|resolve|mute|reinvestigate}
//
// The list is {"incidents": [summary...]}, open ones first; a detail adds the timeline.
// An action answers the detail after it, and only a console token of the project's owner
// or an admin may act (AuthorizeConsoleWrite): an action changes what the on-call sees
// and whether the agent is called again. Its notices go to the project's output stream at
// once, so chat destinations show it (the Slack root message is updated) within a second;
// when the stream is away they wait in the incident's outbox for the incident processor.

const (
	defaultIncidents = 50
	maxIncidents     = 200
	// maxActionBody bounds an action's body, which is {} or nothing.
	maxActionBody = 1024

	msgNoIncident       = "no such incident in this project"
	msgIncidentResolved = "the incident is resolved: there is nothing to %s; reinvestigate it to call the agent again"
	msgIncidentWrite    = "acting on an incident needs a console token of the project's owner or an admin (`Authorization: Bearer <token>` from the control plane, as the dashboard sends it), not minted with a read-only personal access token; API keys, members and read-only tokens only read incidents"
)

// IncidentActions are the actions, in the order the dashboard shows them.
var IncidentActions = []string{incident.ActionAcknowledge, incident.ActionResolve, incident.ActionMute, incident.ActionReinvestigate}

// IsIncidentAction reports whether action is one of IncidentActions.
func IsIncidentAction(action string) bool {
	for _, a := range IncidentActions {
		if a == action {
			return true
		}
	}
	return false
}

func (a *API) incidentsEndpoint() endpoint {
	return endpoint{name: "incidents", parse: query(func(q url.Values) (readFunc, *apierror.Error) {
		status := q.Get("status")
		switch status {
		case "", incident.StatusOpen, incident.StatusAcknowledged, incident.StatusResolved:
		default:
			return nil, apierror.New(http.StatusBadRequest, apierror.InvalidBody,
				fmt.Sprintf("status must be %s, %s or %s (or left out for all), got %q", incident.StatusOpen, incident.StatusAcknowledged, incident.StatusResolved, truncate(status)))
		}
		limit := defaultIncidents
		if v := q.Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return nil, apierror.New(http.StatusBadRequest, apierror.InvalidBody,
					fmt.Sprintf("limit must be a whole number from 1 to %d, got %q", maxIncidents, truncate(v)))
			}
			limit = min(n, maxIncidents)
		}
		return func(ctx context.Context, js jetstream.JetStream, projectID string) (any, error) {
			out := []incident.Summary{}
			st, err := a.set.Incidents.Store(ctx, js)
			if st == nil {
				return map[string]any{"incidents": out}, err
			}
			list, err := st.List(ctx, projectID, status, limit)
			if err != nil {
				return nil, err
			}
			for i := range list {
				out = append(out, list[i].Summary())
			}
			return map[string]any{"incidents": out}, nil
		}, nil
	})}
}

func (a *API) incidentEndpoint() endpoint {
	return endpoint{name: "incidents/{incident_id}", parse: func(req *http.Request) (readFunc, *apierror.Error) {
		id := req.PathValue("incident_id")
		if _, _, ok := incident.ParseID(id); !ok {
			return nil, apierror.New(http.StatusNotFound, apierror.NotFound, msgNoIncident)
		}
		return func(ctx context.Context, js jetstream.JetStream, projectID string) (any, error) {
			st, err := a.set.Incidents.Store(ctx, js)
			if st == nil {
				if err == nil {
					err = apierror.New(http.StatusNotFound, apierror.NotFound, msgNoIncident)
				}
				return nil, err
			}
			inc, err := st.Get(ctx, projectID, id)
			if errors.Is(err, incident.ErrNotFound) {
				return nil, apierror.New(http.StatusNotFound, apierror.NotFound, msgNoIncident)
			}
			if err != nil {
				return nil, err
			}
			return inc.Detail(), nil
		}, nil
	}}
}

func (a *API) incidentActionEndpoints() []endpoint {
	var eps []endpoint
	for _, action := range IncidentActions {
		eps = append(eps, endpoint{name: "incidents/{incident_id}/" + action, post: true, write: true, forbidden: msgIncidentWrite,
			parse: func(req *http.Request) (readFunc, *apierror.Error) {
				if e := emptyObjectBody(req); e != nil {
					return nil, e
				}
				id := req.PathValue("incident_id")
				if _, _, ok := incident.ParseID(id); !ok {
					return nil, apierror.New(http.StatusNotFound, apierror.NotFound, msgNoIncident)
				}
				addr := clientAddr(req)
				return func(ctx context.Context, js jetstream.JetStream, projectID string) (any, error) {
					by := actor(ctx)
					inc, err := a.set.Incidents.Act(ctx, js, projectID, id, action, by)
					if err != nil {
						return nil, err
					}
					a.audit.incidentAction(ctx, js, projectID, id, action, addr, inc.Status, time.Now().UTC())
					// Actions are rare and change what the on-call sees: worth a line an
					// operator can find. Ids only: the email (personal data) stays in the
					// incident's timeline and notices, which the project's people see.
					p, _ := principal.FromContext(ctx)
					a.set.Logger.Info("incident action", zap.String("project_id", projectID), zap.String("incident_id", id),
						zap.String("action", action), zap.String("key_id", p.KeyID))
					return inc.Detail(), nil
				}, nil
			}})
	}
	return eps
}

// actor names who acts, as the timeline, notices and Slack show it: user:<email> when the
// console token carries the email, else user:<user id> (a token minted before it did).
func actor(ctx context.Context) string {
	p, _ := principal.FromContext(ctx)
	if p.Email != "" {
		return "user:" + p.Email
	}
	if strings.HasPrefix(p.KeyID, "user:") {
		return p.KeyID
	}
	return "user:" + p.KeyID
}

// emptyObjectBody accepts no body or {} (whitespace aside): an action takes no input.
func emptyObjectBody(req *http.Request) *apierror.Error {
	body, err := io.ReadAll(io.LimitReader(req.Body, maxActionBody+1))
	if err != nil {
		return apierror.New(http.StatusBadRequest, apierror.InvalidBody, "the body could not be read: "+err.Error())
	}
	if len(body) > maxActionBody {
		return apierror.New(http.StatusRequestEntityTooLarge, apierror.PayloadTooLarge, fmt.Sprintf("the body is larger than %d bytes; an incident action takes {} or no body", maxActionBody))
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil || len(m) > 0 {
		return apierror.New(http.StatusBadRequest, apierror.InvalidBody, "an incident action takes {} or no body")
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// Incidents opens the incident store (internal/incident) for the console and the
// receiver's Slack interactions and results, once the bucket exists. It never creates the
// bucket: the incident processor does, with the replicas it is given, and until it has
// no project has an incident to read, act on, or attach a result to.
type Incidents struct {
	Logger *zap.Logger

	mu    sync.Mutex
	store *incident.Store
}

// storeOpenTimeout bounds opening the store, within the caller's own deadline.
const storeOpenTimeout = 5 * time.Second

// Store returns the store, or nil and no error while the bucket does not exist.
func (s *Incidents) Store(ctx context.Context, js jetstream.JetStream) (*incident.Store, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.store != nil {
		return s.store, nil
	}
	if js == nil {
		return nil, errors.New("no NATS connection")
	}
	ctx, cancel := context.WithTimeout(ctx, storeOpenTimeout)
	defer cancel()
	if _, err := js.KeyValue(ctx, incident.Bucket); err != nil {
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			return nil, nil
		}
		return nil, err
	}
	// The bucket exists, so Open only binds to it (replicas apply to a creation).
	st, err := incident.Open(ctx, js, 1)
	if err != nil {
		return nil, err
	}
	s.store = st
	return st, nil
}

// Act applies action to the project's incident id on behalf of by and publishes its
// notices. Refusals the caller answers as they are are *apierror.Error (404 for an
// unknown incident, 409 incident_resolved); any other error is storage's.
func (s *Incidents) Act(ctx context.Context, js jetstream.JetStream, projectID, id, action, by string) (incident.Incident, error) {
	st, err := s.Store(ctx, js)
	if err != nil {
		return incident.Incident{}, err
	}
	if st == nil {
		return incident.Incident{}, apierror.New(http.StatusNotFound, apierror.NotFound, msgNoIncident)
	}
	inc, notices, err := st.Act(ctx, projectID, id, action, by, time.Now().UTC())
	switch {
	case errors.Is(err, incident.ErrNotFound):
		return inc, apierror.New(http.StatusNotFound, apierror.NotFound, msgNoIncident)
	case errors.Is(err, incident.ErrResolved):
		return inc, apierror.New(http.StatusConflict, apierror.IncidentResolved, fmt.Sprintf(msgIncidentResolved, action))
	case err != nil:
		return inc, err
	}
	s.publish(ctx, js, projectID, id, action, inc, notices)
	return inc, nil
}

// publish puts an action's notices on the output stream and clears what it published
// from the incident's outbox. The action is stored, with its notices in the outbox,
// whether or not this succeeds: a notice that cannot be published now is no reason to
// answer as if the action failed (a retry would act twice). It stays in the outbox, and
// the incident processor's ticker, which watches every incident, publishes it a few
// seconds later; the stream's message ids make a notice published twice one.
//
// It publishes the whole outbox, in order, not only the action's notices: Published
// clears everything up to a sequence, and an earlier notice still waiting there (an
// opening whose process could not publish it) must reach the destinations first, not be
// cleared unpublished.
func (s *Incidents) publish(ctx context.Context, js jetstream.JetStream, projectID, id, action string, inc incident.Incident, notices []incident.Notice) {
	st, err := s.Store(ctx, js)
	if st == nil || err != nil {
		return
	}
	out := inc.Outbox
	if len(out) == 0 {
		out = notices
	}
	var published []incident.Notice
	for _, n := range out {
		if perr := incident.Publish(ctx, js, js.Conn(), projectID, n); perr != nil {
			// The rest wait too: destinations get an incident's notices in order.
			s.logger().Warn("an incident action's notice could not be published now; the incident processor publishes it from the incident's outbox",
				zap.String("project_id", projectID), zap.String("incident_id", id), zap.String("action", action), zap.Error(perr))
			break
		}
		published = append(published, n)
	}
	cleared := map[string]bool{}
	for _, n := range published {
		if cleared[n.Incident.ID] {
			continue
		}
		cleared[n.Incident.ID] = true
		if err := st.Published(ctx, projectID, n.Incident.ID, incident.MaxSeq(published, n.Incident.ID)); err != nil {
			// Published, only not cleared: the ticker publishes it again, stored once.
			s.logger().Debug("an incident action's published notices stay in the outbox",
				zap.String("project_id", projectID), zap.String("incident_id", n.Incident.ID), zap.Error(err))
		}
	}
}

// AttachResult attaches an agent result's text to the incident whose call requestID
// was; false when it was no incident call (or no incident was ever opened).
func (s *Incidents) AttachResult(ctx context.Context, js jetstream.JetStream, projectID, requestID, text string) (bool, error) {
	st, err := s.Store(ctx, js)
	if st == nil {
		return false, err
	}
	_, ok, err := st.AttachResult(ctx, projectID, requestID, text, time.Now().UTC())
	return ok, err
}

func (s *Incidents) logger() *zap.Logger {
	if s.Logger == nil {
		return zap.NewNop()
	}
	return s.Logger
}
