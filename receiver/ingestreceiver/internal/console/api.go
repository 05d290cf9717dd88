// Package console is the console's read API, served by the ingest receiver: the
// dashboard's views read a project's records here, from the browser, so payloads never
// pass through the control plane.
//
//	GET  /console/v1/projects/{project_id}/events?limit=50&source_id=<id>
//	GET  /console/v1/projects/{project_id}/fields?limit=100&source_id=<id>
//	GET  /console/v1/projects/{project_id}/deliveries?state=&kind=&since=&limit=
//	GET  /console/v1/projects/{project_id}/deliveries/{delivery_id}
//	POST /console/v1/projects/{project_id}/deliveries/replay
//	GET  /console/v1/projects/{project_id}/ledger
//	GET  /console/v1/projects/{project_id}/trace?seq=N | ?request_id=req_...
//	POST /console/v1/projects/{project_id}/pipeline/dry-run
//	GET  /console/v1/projects/{project_id}/incidents?status=&limit=50
//	GET  /console/v1/projects/{project_id}/incidents/{incident_id}
//	POST /console/v1/projects/{project_id}/incidents/{incident_id}/{acknowledge|resolve|mute|reinvestigate}
//
// Every endpoint shares what api.go does (CORS, one method, the console credential checked
// against the project, a bounded number of reads at once, a time limit, the JSON answer);
// an endpoint is one file that parses its request and reads (events.go, fields.go,
// deliveries.go, replay.go, ledger.go, trace.go, dryrun.go, incidents.go). Add it to
// endpoints() below.
package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

const (
	// maxReads bounds the reads running at once per API (one per receiver); more are
	// answered 503 with Retry-After. A read holds up to maxReadBytes of records plus a
	// fetch.
	maxReads = 4
	// readTimeout bounds one read, and the writing of its answer.
	readTimeout = 10 * time.Second
	// maxParam bounds a query parameter that names something (a source id).
	maxParam = 256
)

// Authenticator is what the projectauth extension offers the console: whether a request's
// credential (API key or console token) opens the project, whether it may also change it
// (replay), the NATS connection reads go through, and the mirror (a project's sinks).
type Authenticator interface {
	AuthenticateConsole(ctx context.Context, headers map[string][]string, projectID string) (context.Context, error)
	// AuthorizeConsoleWrite refuses what AuthenticateConsole refuses, and a credential
	// that may read but not write with an error that has a Forbidden() bool method.
	AuthorizeConsoleWrite(ctx context.Context, headers map[string][]string, projectID string) (context.Context, error)
	JetStream() jetstream.JetStream
	// MirrorCache may return nil (no mirror): the ledger then lists no destinations.
	MirrorCache() *mirrorcache.Cache
}

// Settings are the API's dependencies, given by the receiver.
type Settings struct {
	// Auth is nil when the receiver's authenticator is not projectauth: reads are then
	// answered 500 (the receiver logged the configuration problem at start).
	Auth Authenticator
	// Refuse turns an authentication refusal into its answer, as the receiver's other
	// paths do.
	Refuse func(error) *apierror.Error
	// RetryAfter is advertised by 503 answers.
	RetryAfter time.Duration
	Logger     *zap.Logger
	// PipelineDurable and SinkDurable name the consumers whose backlog the ledger shows
	// as pending (deliverylog.ViewOptions); ReplayReplicas is the replay queue's
	// replicas when the console is first to create it.
	PipelineDurable string
	SinkDurable     string
	ReplayReplicas  int
	// MaxRecordBytes bounds a record while a dry run transforms it, as the pipeline
	// does (SVC_MAX_RECORD_BYTES); 0 is ottlevent.DefaultMaxRecordBytes, its default.
	MaxRecordBytes int
	// AllowedOrigins are the origins (scheme://host[:port], as ParseOrigins gives them)
	// whose pages may call the API from a browser: the dashboard's. None: no CORS.
	AllowedOrigins []string
	// Incidents opens the incident store; the receiver shares it with its Slack
	// interactions and results. Nil: the API opens its own.
	Incidents *Incidents
}

// API serves the console read endpoints.
type API struct {
	set Settings
	// reads holds a token per running read: memory is per process, so the bound is per
	// receiver instance rather than per project.
	reads chan struct{}
	// replays makes sure the replay queue exists, once per API.
	replays replayQueue
	// origins is Settings.AllowedOrigins as a set.
	origins map[string]bool
	// audit publishes who read and who replayed (audit.go).
	audit *auditor
}

// New returns the API.
func New(set Settings) *API {
	if set.Incidents == nil {
		set.Incidents = &Incidents{Logger: set.Logger}
	}
	// The audit stream is created with the replay queue's replicas: both are small
	// service-wide streams.
	a := &API{set: set, reads: make(chan struct{}, maxReads), origins: map[string]bool{}, audit: newAuditor(set.Logger, set.ReplayReplicas)}
	for _, o := range set.AllowedOrigins {
		a.origins[o] = true
	}
	return a
}

// endpoint is one request, GET (or POST) /console/v1/projects/{project_id}/<name>.
type endpoint struct {
	// name is the path after the project; it may hold wildcards ({delivery_id}).
	name string
	// post marks an endpoint that takes POST (with a JSON body) rather than GET and HEAD.
	post bool
	// write marks an endpoint that changes the project (AuthorizeConsoleWrite) rather
	// than only reads it (AuthenticateConsole).
	write bool
	// forbidden, when set, is the 403 answer's message for a credential that may read but
	// not write, instead of the authenticator's (which speaks of replays).
	forbidden string
	// status answers success; 0 means 200.
	status int
	// parse checks the request (query, path, body) before a read slot is taken, and
	// returns the read.
	parse func(req *http.Request) (readFunc, *apierror.Error)
	// parseDetailed replaces parse for an endpoint whose refusals say more than a code
	// and a message (the dry run's invalid_pipeline names the field and the position).
	parseDetailed func(req *http.Request) (readFunc, *refusal)
}

// refusal is an error answer with details added to its error object beside the code
// and message.
type refusal struct {
	*apierror.Error
	details map[string]any
}

// query adapts a parse step that needs only the query.
func query(parse func(q url.Values) (readFunc, *apierror.Error)) func(*http.Request) (readFunc, *apierror.Error) {
	return func(req *http.Request) (readFunc, *apierror.Error) { return parse(req.URL.Query()) }
}

// readFunc reads an authenticated project's data and returns the JSON answer. An
// *apierror.Error is answered as it is; any other error 503: storage could not be read.
type readFunc func(ctx context.Context, js jetstream.JetStream, projectID string) (any, error)

func (a *API) endpoints() []endpoint {
	eps := []endpoint{eventsEndpoint(), fieldsEndpoint(), deliveriesEndpoint(), deliveryEndpoint(),
		a.replayEndpoint(), a.ledgerEndpoint(), traceEndpoint(), a.dryRunEndpoint(),
		a.incidentsEndpoint(), a.incidentEndpoint()}
	return append(eps, a.incidentActionEndpoints()...)
}

// Register adds the console's paths to mux.
func (a *API) Register(mux *http.ServeMux) {
	var names []string
	for _, ep := range a.endpoints() {
		mux.HandleFunc("/console/v1/projects/{project_id}/"+ep.name, func(w http.ResponseWriter, req *http.Request) {
			a.serve(w, req, ep)
		})
		names = append(names, "/"+ep.name)
	}
	known := "/console/v1/projects/{project_id} followed by " + strings.Join(names, ", ")
	mux.HandleFunc("/console/", func(w http.ResponseWriter, req *http.Request) {
		a.setCORS(w, req, "GET, OPTIONS")
		if req.Method == http.MethodOptions {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		apierror.Write(w, apierror.New(http.StatusNotFound, apierror.NotFound,
			fmt.Sprintf("no endpoint %s; the console read API has %s", req.URL.Path, known)))
	})
}

func (ep endpoint) allow() string {
	if ep.post {
		return "POST, OPTIONS"
	}
	return "GET, OPTIONS"
}

func (a *API) serve(w http.ResponseWriter, req *http.Request, ep endpoint) {
	a.setCORS(w, req, ep.allow())
	w.Header().Set("Cache-Control", "no-store")
	if req.Method == http.MethodOptions {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	answer, release, e := a.read(req, ep)
	if e != nil {
		if e.Status == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", ep.allow())
		}
		writeRefusal(w, e)
		return
	}
	// The records stay in memory until the answer is written, so the read keeps its slot
	// until then; a client too slow to take the answer is cut off rather than hold it.
	defer release()
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(readTimeout))
	w.Header().Set("Content-Type", "application/json")
	status := ep.status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	if req.Method == http.MethodHead {
		return
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(answer)
}

// read authenticates and reads; on success the caller calls release once the answer is
// written.
func (a *API) read(req *http.Request, ep endpoint) (answer any, release func(), r *refusal) {
	answer, release, e, r := a.readDetailed(req, ep)
	if e != nil {
		return nil, nil, &refusal{Error: e}
	}
	return answer, release, r
}

func (a *API) readDetailed(req *http.Request, ep endpoint) (answer any, release func(), e *apierror.Error, r *refusal) {
	switch {
	case ep.post && req.Method != http.MethodPost:
		return nil, nil, apierror.New(http.StatusMethodNotAllowed, apierror.MethodNotAllowed, "only POST is allowed here"), nil
	case !ep.post && req.Method != http.MethodGet && req.Method != http.MethodHead:
		return nil, nil, apierror.New(http.StatusMethodNotAllowed, apierror.MethodNotAllowed, "only GET is allowed here"), nil
	}
	projectID := req.PathValue("project_id")
	if a.set.Auth == nil {
		return nil, nil, apierror.New(http.StatusInternalServerError, apierror.Internal, "the console read API is not available because of a server configuration problem"), nil
	}
	authorize := a.set.Auth.AuthenticateConsole
	if ep.write {
		authorize = a.set.Auth.AuthorizeConsoleWrite
	}
	ctx, err := authorize(req.Context(), req.Header, projectID)
	if err != nil {
		var f interface{ Forbidden() bool }
		if errors.As(err, &f) && f.Forbidden() {
			msg := principal.Message(err, "your credentials may read this project but not change it")
			if ep.forbidden != "" {
				msg = ep.forbidden
			}
			return nil, nil, apierror.New(http.StatusForbidden, apierror.Forbidden, msg), nil
		}
		return nil, nil, a.set.Refuse(err), nil
	}
	if !streams.ValidProjectID(projectID) { // unreachable for an authenticated project
		return nil, nil, apierror.New(http.StatusNotFound, apierror.NotFound, "no such project, or your credentials do not open it"), nil
	}
	var run readFunc
	if ep.parseDetailed != nil {
		if run, r = ep.parseDetailed(req); r != nil {
			return nil, nil, nil, r
		}
	} else if run, e = ep.parse(req); e != nil {
		return nil, nil, e, nil
	}
	js := a.set.Auth.JetStream()
	if js == nil {
		return nil, nil, a.unavailable(), nil
	}
	select {
	case a.reads <- struct{}{}:
	default:
		busy := apierror.New(http.StatusServiceUnavailable, apierror.Unavailable,
			"the receiver is serving as many console reads as it allows at once; retry in a moment")
		busy.RetryAfter = a.set.RetryAfter
		return nil, nil, busy, nil
	}
	release = func() { <-a.reads }
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	answer, err = run(ctx, js, projectID)
	var ae *apierror.Error
	if errors.As(err, &ae) {
		release()
		return nil, nil, ae, nil
	}
	if err != nil {
		release()
		a.set.Logger.Debug("console read failed", zap.String("project_id", projectID), zap.String("endpoint", ep.name), zap.Error(err))
		return nil, nil, a.unavailable(), nil
	}
	if !ep.write {
		a.audit.read(ctx, req, js, projectID, ep.name)
	}
	return answer, release, nil, nil
}

func (a *API) unavailable() *apierror.Error {
	e := apierror.New(http.StatusServiceUnavailable, apierror.Unavailable, "storage (NATS JetStream) cannot be read right now; retry in a moment")
	e.RetryAfter = a.set.RetryAfter
	return e
}
