package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"

	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/incident"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// The console tools' arguments, each turned into the console request it stands for
// (consoleCall) without touching anything: the checks are the data plane's own, so an
// agent learns what is wrong from the tool instead of from a refused request, and a
// value never changes the request's shape (path segments are escaped, queries encoded).

// Bounds of the console reads' limits (receiver/ingestreceiver/internal/console).
const (
	maxEventsLimit = 500
	maxFieldsLimit = 1000
	maxDryRunLimit = 1000
	// maxDryRunPipeline bounds the pipeline an agent sends: a few expressions, far below
	// the receiver's own bound on the whole body.
	maxDryRunPipeline = 128 << 10
)

// deliveryIDRE is a delivery id or an agent call's request id, as the data plane takes
// them (deliverylog: one subject token).
var deliveryIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// consoleCall is one request to the receiver's console API, relative to the project's
// /console/v1/projects/{project_id}.
type consoleCall struct {
	method string
	path   string // escaped, from "/"
	query  url.Values
	body   json.RawMessage // POST only
	// write marks a change (replay): only the owner and admins may.
	write bool
	how   string
}

// consoleArgs are a console tool's arguments.
type consoleArgs interface {
	project() string
	call() (consoleCall, error)
}

// limitParam checks an optional limit (0: the receiver's default) and adds it.
func limitParam(q url.Values, limit, maxLimit int) error {
	if limit == 0 {
		return nil
	}
	if limit < 1 || limit > maxLimit {
		return fmt.Errorf("limit must be a whole number from 1 to %d, got %d", maxLimit, limit)
	}
	q.Set("limit", strconv.Itoa(limit))
	return nil
}

// sourceParam checks an optional source id and adds it.
func sourceParam(q url.Values, sourceID string) error {
	if sourceID == "" {
		return nil
	}
	if !streams.ValidToken(sourceID) {
		return errors.New("source_id must be a source's id (src_...), as list_sources shows it")
	}
	q.Set("source_id", sourceID)
	return nil
}

type recentEventsIn struct {
	ProjectID string `json:"project_id" jsonschema:"the project's id (p_...); list_projects shows yours"`
	SourceID  string `json:"source_id,omitempty" jsonschema:"only this push source's records (src_...); list_sources shows them"`
	Limit     int    `json:"limit,omitempty" jsonschema:"how many records, newest first: 1 to 500 (default 50)"`
}

func (in recentEventsIn) project() string { return in.ProjectID }

func (in recentEventsIn) call() (consoleCall, error) {
	q := url.Values{}
	if err := limitParam(q, in.Limit, maxEventsLimit); err != nil {
		return consoleCall{}, err
	}
	if err := sourceParam(q, in.SourceID); err != nil {
		return consoleCall{}, err
	}
	return consoleCall{method: "GET", path: "/events", query: q,
		how: `answers {"events": [{"seq", "time", "signal", "source_id", "record"}]}, newest first; record is the stored record as triggers see it`}, nil
}

type fieldsIn struct {
	ProjectID string `json:"project_id" jsonschema:"the project's id (p_...); list_projects shows yours"`
	SourceID  string `json:"source_id,omitempty" jsonschema:"only this push source's records (src_...); list_sources shows them"`
	Limit     int    `json:"limit,omitempty" jsonschema:"how many of the newest records to sample: 1 to 1000 (default 100)"`
}

func (in fieldsIn) project() string { return in.ProjectID }

func (in fieldsIn) call() (consoleCall, error) {
	q := url.Values{}
	if err := limitParam(q, in.Limit, maxFieldsLimit); err != nil {
		return consoleCall{}, err
	}
	if err := sourceParam(q, in.SourceID); err != nil {
		return consoleCall{}, err
	}
	return consoleCall{method: "GET", path: "/fields", query: q,
		how: "answers the field paths the newest records carry, with how many records have each and its JSON types: what a trigger, group_key or dedup_key can rely on"}, nil
}

type dryRunIn struct {
	ProjectID string `json:"project_id" jsonschema:"the project's id (p_...); list_projects shows yours"`
	// Pipeline stays JSON, checked against mirror.Pipeline and sent as it came; its
	// schema is set in dryRunSchema.
	Pipeline json.RawMessage `json:"pipeline"`
	Limit    int             `json:"limit,omitempty" jsonschema:"how many of the newest records to run it over: 1 to 1000 (default 100)"`
}

func (in dryRunIn) project() string { return in.ProjectID }

func (in dryRunIn) call() (consoleCall, error) {
	if len(in.Pipeline) > maxDryRunPipeline {
		return consoleCall{}, fmt.Errorf("pipeline is larger than %d bytes", maxDryRunPipeline)
	}
	var compact bytes.Buffer
	if !bytes.HasPrefix(bytes.TrimSpace(in.Pipeline), []byte("{")) || json.Compact(&compact, in.Pipeline) != nil {
		return consoleCall{}, errors.New("pipeline must be an object with set_pipeline's fields (trigger, transforms, window_enabled, ...)")
	}
	// The receiver refuses unknown fields; refused here first, naming the field.
	dec := json.NewDecoder(bytes.NewReader(compact.Bytes()))
	dec.DisallowUnknownFields()
	var p mirror.Pipeline
	if err := dec.Decode(&p); err != nil {
		return consoleCall{}, fmt.Errorf("pipeline does not fit set_pipeline's fields: %v", err)
	}
	limit := in.Limit
	if limit == 0 {
		limit = 100
	}
	if limit < 1 || limit > maxDryRunLimit {
		return consoleCall{}, fmt.Errorf("limit must be a whole number from 1 to %d, got %d", maxDryRunLimit, in.Limit)
	}
	body, err := json.Marshal(struct {
		Pipeline json.RawMessage `json:"pipeline"`
		Limit    int             `json:"limit"`
	}{compact.Bytes(), limit})
	if err != nil {
		return consoleCall{}, err
	}
	return consoleCall{method: "POST", path: "/pipeline/dry-run", body: body,
		how: `POST body as it is (Content-Type: application/json); answers {"evaluated", "matched", "records": [each matched record as stored and as sent], "calls": [each body the agent would get], "errors": [...]}, or invalid_pipeline naming the field and position; nothing is sent or stored`}, nil
}

type deliveriesIn struct {
	ProjectID string `json:"project_id" jsonschema:"the project's id (p_...); list_projects shows yours"`
	State     string `json:"state,omitempty" jsonschema:"only deliveries in this state: pending, retrying, delivered or dead_lettered (the dead letters)"`
	Kind      string `json:"kind,omitempty" jsonschema:"only agent calls (agent) or destination deliveries (sink)"`
	Since     string `json:"since,omitempty" jsonschema:"only deliveries created at or after this time (RFC 3339)"`
	Limit     int    `json:"limit,omitempty" jsonschema:"how many, newest first: 1 to 500 (default 50)"`
}

func (in deliveriesIn) project() string { return in.ProjectID }

func (in deliveriesIn) call() (consoleCall, error) {
	q := url.Values{}
	for k, v := range map[string]string{"state": in.State, "kind": in.Kind, "since": in.Since} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if err := limitParam(q, in.Limit, deliverylog.MaxLimit); err != nil {
		return consoleCall{}, err
	}
	if _, err := deliverylog.ParseFilter(q); err != nil {
		return consoleCall{}, err
	}
	return consoleCall{method: "GET", path: "/deliveries", query: q,
		how: `answers {"deliveries": [{"id", "kind", "sink_id", "request_id", "state", "attempts", "status_code", "error", "latency_ms", "records", "created_at", "updated_at"}]}, newest first; console_delivery shows one with its bodies`}, nil
}

type deliveryIn struct {
	ProjectID  string `json:"project_id" jsonschema:"the project's id (p_...); list_projects shows yours"`
	DeliveryID string `json:"delivery_id" jsonschema:"a delivery's id, as console_deliveries lists it"`
}

func (in deliveryIn) project() string { return in.ProjectID }

func (in deliveryIn) call() (consoleCall, error) {
	if !deliveryIDRE.MatchString(in.DeliveryID) {
		return consoleCall{}, errors.New("delivery_id must be a delivery's id, as console_deliveries lists it: 1 to 128 letters, digits, '-' or '_'")
	}
	return consoleCall{method: "GET", path: "/deliveries/" + url.PathEscape(in.DeliveryID),
		how: `answers the delivery with "attempt_log", "request_body" (what was sent) and the other side's answer`}, nil
}

type ledgerIn struct {
	ProjectID string `json:"project_id" jsonschema:"the project's id (p_...); list_projects shows yours"`
}

func (in ledgerIn) project() string { return in.ProjectID }

func (in ledgerIn) call() (consoleCall, error) {
	return consoleCall{method: "GET", path: "/ledger",
		how: `answers {"received", "dropped", "agent_calls", "results", "delivered", "dead_lettered", "pending"}: counts that add up (received = dropped + sent to the agent + dead-lettered + pending, in records)`}, nil
}

type traceIn struct {
	ProjectID string `json:"project_id" jsonschema:"the project's id (p_...); list_projects shows yours"`
	Seq       uint64 `json:"seq,omitempty" jsonschema:"a record's seq, as console_recent_events shows it; or give request_id"`
	RequestID string `json:"request_id,omitempty" jsonschema:"an agent call's X-Request-Id (a delivery's request_id); or give seq"`
}

func (in traceIn) project() string { return in.ProjectID }

func (in traceIn) call() (consoleCall, error) {
	q := url.Values{}
	switch {
	case (in.Seq == 0) == (in.RequestID == ""):
		return consoleCall{}, errors.New("give exactly one of seq (a record's seq from console_recent_events) and request_id (an agent call's X-Request-Id)")
	case in.Seq != 0:
		q.Set("seq", strconv.FormatUint(in.Seq, 10))
	case !deliveryIDRE.MatchString(in.RequestID):
		return consoleCall{}, errors.New("request_id must be an agent call's X-Request-Id: 1 to 128 letters, digits, '-' or '_'")
	default:
		q.Set("request_id", in.RequestID)
	}
	return consoleCall{method: "GET", path: "/trace", query: q,
		how: "answers the record, the agent call that carried it, the results the agent posted for that call and each destination's delivery of them"}, nil
}

type replayIn struct {
	ProjectID string   `json:"project_id" jsonschema:"the project's id (p_...); list_projects shows yours"`
	IDs       []string `json:"ids,omitempty" jsonschema:"the deliveries to send again (1 to 1000 ids from console_deliveries); or give state"`
	State     string   `json:"state,omitempty" jsonschema:"dead_lettered: send every dead letter again (narrowed by kind and since); or give ids"`
	Kind      string   `json:"kind,omitempty" jsonschema:"with state: only agent calls (agent) or destination deliveries (sink)"`
	Since     string   `json:"since,omitempty" jsonschema:"with state: only dead letters created at or after this time (RFC 3339)"`
}

func (in replayIn) project() string { return in.ProjectID }

func (in replayIn) call() (consoleCall, error) {
	body, err := json.Marshal(struct {
		IDs   []string `json:"ids,omitempty"`
		State string   `json:"state,omitempty"`
		Kind  string   `json:"kind,omitempty"`
		Since string   `json:"since,omitempty"`
	}{in.IDs, in.State, in.Kind, in.Since})
	if err != nil {
		return consoleCall{}, err
	}
	if len(body) > deliverylog.MaxReplayBody {
		return consoleCall{}, fmt.Errorf("ids: give at most %d delivery ids", deliverylog.MaxReplay)
	}
	if _, err := deliverylog.ParseReplayRequest(body); err != nil {
		return consoleCall{}, err
	}
	return consoleCall{method: "POST", path: "/deliveries/replay", body: body, write: true,
		how: `POST body as it is with these headers (the Idempotency-Key makes a retry of this very request queue nothing twice); answers 202 {"replayed", "skipped": [{"id", "reason"}], "replay_id"}; each replayed delivery is sent again as a new delivery whose replay_of names the old one`}, nil
}

// Incidents (incident mode): the receiver's /incidents.
const maxIncidentsLimit = 200

// Incident statuses and actions, as the receiver takes them.
var (
	incidentStatuses = []string{incident.StatusOpen, incident.StatusAcknowledged, incident.StatusResolved}
	incidentActions  = []string{incident.ActionAcknowledge, incident.ActionResolve, incident.ActionMute, incident.ActionReinvestigate}
)

func checkIncidentID(id string) error {
	if _, _, ok := incident.ParseID(id); !ok {
		return errors.New("incident_id must be an incident's id (inc_<32 hexadecimal characters>_<n>), as console_incidents lists it")
	}
	return nil
}

type incidentsIn struct {
	ProjectID string `json:"project_id" jsonschema:"the project's id (p_...); list_projects shows yours"`
	Status    string `json:"status,omitempty" jsonschema:"only incidents in this status: open, acknowledged or resolved; left out, all of them, open and acknowledged first"`
	Limit     int    `json:"limit,omitempty" jsonschema:"how many: 1 to 200 (default 50)"`
}

func (in incidentsIn) project() string { return in.ProjectID }

func (in incidentsIn) call() (consoleCall, error) {
	q := url.Values{}
	if in.Status != "" {
		if !slices.Contains(incidentStatuses, in.Status) {
			return consoleCall{}, fmt.Errorf("status must be open, acknowledged or resolved, got %q", in.Status)
		}
		q.Set("status", in.Status)
	}
	if err := limitParam(q, in.Limit, maxIncidentsLimit); err != nil {
		return consoleCall{}, err
	}
	return consoleCall{method: "GET", path: "/incidents", query: q,
		how: `answers {"incidents": [{"id", "fingerprint", "title", "status", "opened_at", "updated_at", "resolved_at", "events", "calls", "acknowledged_by", "muted_until", "last_result", "counts": {"events", "new_events", "calls"}}]}, open and acknowledged ones first (newest update first), then resolved ones newest first; console_incident shows one with its timeline`}, nil
}

type incidentIn struct {
	ProjectID  string `json:"project_id" jsonschema:"the project's id (p_...); list_projects shows yours"`
	IncidentID string `json:"incident_id" jsonschema:"an incident's id (inc_...), as console_incidents lists it"`
}

func (in incidentIn) project() string { return in.ProjectID }

func (in incidentIn) call() (consoleCall, error) {
	if err := checkIncidentID(in.IncidentID); err != nil {
		return consoleCall{}, err
	}
	return consoleCall{method: "GET", path: "/incidents/" + url.PathEscape(in.IncidentID),
		how: `answers the incident as console_incidents lists it, with "timeline" (opened, events, call, result, chat, acknowledged, muted, resolved, reopened, reinvestigate entries: {"at", "type", "by", "detail", "request_id", "sink_id", "count", "outcome"}, oldest first, at most 200) and "timeline_dropped" (older entries no longer kept); 404 not_found for an unknown incident`}, nil
}

type incidentActionIn struct {
	ProjectID  string `json:"project_id" jsonschema:"the project's id (p_...); list_projects shows yours"`
	IncidentID string `json:"incident_id" jsonschema:"an incident's id (inc_...), as console_incidents lists it"`
	Action     string `json:"action" jsonschema:"acknowledge (someone is on it), resolve (close it now), mute (no update calls for an hour) or reinvestigate (call the agent again now with the incident's events)"`
}

func (in incidentActionIn) project() string { return in.ProjectID }

func (in incidentActionIn) call() (consoleCall, error) {
	if err := checkIncidentID(in.IncidentID); err != nil {
		return consoleCall{}, err
	}
	if !slices.Contains(incidentActions, in.Action) {
		return consoleCall{}, fmt.Errorf("action must be acknowledge, resolve, mute or reinvestigate, got %q", in.Action)
	}
	return consoleCall{method: "POST", path: "/incidents/" + url.PathEscape(in.IncidentID) + "/" + in.Action,
		body: json.RawMessage(`{}`), write: true,
		how: `POST body as it is with these headers; answers 200 with the incident after the action (as console_incident shows it), 409 incident_resolved when acknowledging or muting a resolved incident, 404 not_found for an unknown incident; the incident's timeline names you as who acted`}, nil
}
