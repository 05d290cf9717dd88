// Package console is the console's read API, served by the ingest receiver: the
// dashboard's views read a project's records here, from the browser, so payloads never
// pass through the control plane.
//
//	GET /console/v1/projects/{project_id}/events?limit=50&source_id=<id>
//	GET /console/v1/projects/{project_id}/fields?limit=100&source_id=<id>
//
// Every endpoint shares what api.go does (CORS, GET only, the console credential checked
// against the project, a bounded number of reads at once, a time limit, the JSON answer);
// an endpoint is one file that parses its query and reads (events.go, fields.go). Add it
// to endpoints() below.
package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/components/apierror"
	"github.com/otelcol-svc/otelcol-svc/components/streams"
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
// credential (API key or console token) opens the project, and the NATS connection reads
// go through.
type Authenticator interface {
	AuthenticateConsole(ctx context.Context, headers map[string][]string, projectID string) (context.Context, error)
	JetStream() jetstream.JetStream
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
}

// API serves the console read endpoints.
type API struct {
	set Settings
	// reads holds a token per running read: memory is per process, so the bound is per
	// receiver instance rather than per project.
	reads chan struct{}
}

// New returns the API.
func New(set Settings) *API {
	return &API{set: set, reads: make(chan struct{}, maxReads)}
}

// endpoint is one read, GET /console/v1/projects/{project_id}/<name>.
type endpoint struct {
	name string
	// parse checks the query before a read slot is taken, and returns the read.
	parse func(q url.Values) (readFunc, *apierror.Error)
}

// readFunc reads an authenticated project's data and returns the JSON answer. An error is
// answered 503: storage could not be read.
type readFunc func(ctx context.Context, js jetstream.JetStream, projectID string) (any, error)

func (a *API) endpoints() []endpoint {
	return []endpoint{eventsEndpoint(), fieldsEndpoint()}
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
	known := "/console/v1/projects/{project_id}" + strings.Join(names, " and ")
	mux.HandleFunc("/console/", func(w http.ResponseWriter, req *http.Request) {
		setCORS(w)
		if req.Method == http.MethodOptions {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		apierror.Write(w, apierror.New(http.StatusNotFound, apierror.NotFound,
			fmt.Sprintf("no endpoint %s; the console read API has %s", req.URL.Path, known)))
	})
}

// setCORS lets the dashboard, served from another origin, call the read API from the
// browser. Any origin may: requests carry a bearer credential (API key or console token)
// in a header, never a cookie, so a foreign page gains nothing it does not already hold.
func setCORS(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Allow-Methods", "GET, OPTIONS")
	h.Set("Access-Control-Allow-Headers", "Authorization, X-API-Key")
	h.Set("Access-Control-Max-Age", "600")
}

func (a *API) serve(w http.ResponseWriter, req *http.Request, ep endpoint) {
	setCORS(w)
	w.Header().Set("Cache-Control", "no-store")
	if req.Method == http.MethodOptions {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	answer, release, e := a.read(req, ep)
	if e != nil {
		if e.Status == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", "GET, OPTIONS")
		}
		apierror.Write(w, e)
		return
	}
	// The records stay in memory until the answer is written, so the read keeps its slot
	// until then; a client too slow to take the answer is cut off rather than hold it.
	defer release()
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(readTimeout))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if req.Method == http.MethodHead {
		return
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(answer)
}

// read authenticates and reads; on success the caller calls release once the answer is
// written.
func (a *API) read(req *http.Request, ep endpoint) (answer any, release func(), e *apierror.Error) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		return nil, nil, apierror.New(http.StatusMethodNotAllowed, apierror.MethodNotAllowed, "only GET is allowed here")
	}
	projectID := req.PathValue("project_id")
	if a.set.Auth == nil {
		return nil, nil, apierror.New(http.StatusInternalServerError, apierror.Internal, "the console read API is not available because of a server configuration problem")
	}
	ctx, err := a.set.Auth.AuthenticateConsole(req.Context(), req.Header, projectID)
	if err != nil {
		return nil, nil, a.set.Refuse(err)
	}
	if !streams.ValidProjectID(projectID) { // unreachable for an authenticated project
		return nil, nil, apierror.New(http.StatusNotFound, apierror.NotFound, "no such project, or your credentials do not open it")
	}
	run, e := ep.parse(req.URL.Query())
	if e != nil {
		return nil, nil, e
	}
	js := a.set.Auth.JetStream()
	if js == nil {
		return nil, nil, a.unavailable()
	}
	select {
	case a.reads <- struct{}{}:
	default:
		busy := apierror.New(http.StatusServiceUnavailable, apierror.Unavailable,
			"the receiver is serving as many console reads as it allows at once; retry in a moment")
		busy.RetryAfter = a.set.RetryAfter
		return nil, nil, busy
	}
	release = func() { <-a.reads }
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	answer, err = run(ctx, js, projectID)
	if err != nil {
		release()
		a.set.Logger.Debug("console read failed", zap.String("project_id", projectID), zap.String("endpoint", ep.name), zap.Error(err))
		return nil, nil, a.unavailable()
	}
	return answer, release, nil
}

func (a *API) unavailable() *apierror.Error {
	e := apierror.New(http.StatusServiceUnavailable, apierror.Unavailable, "storage (NATS JetStream) cannot be read right now; retry in a moment")
	e.RetryAfter = a.set.RetryAfter
	return e
}
