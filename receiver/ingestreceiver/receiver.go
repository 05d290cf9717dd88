package ingestreceiver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/extension/extensionauth"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receiverhelper"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/records"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
	"github.com/otelcol-svc/otelcol-svc/internal/requestid"
	"github.com/otelcol-svc/otelcol-svc/internal/usage"
	"github.com/otelcol-svc/otelcol-svc/receiver/ingestreceiver/internal/console"
	"github.com/otelcol-svc/otelcol-svc/receiver/ingestreceiver/internal/otlphttp"
)

type ingestReceiver struct {
	cfg      *Config
	settings receiver.Settings

	logs    consumer.Logs
	traces  consumer.Traces
	metrics consumer.Metrics

	obs   *receiverhelper.ObsReport
	admit *admission
	auth  extensionauth.Server
	dp    dataPlaneAuth // the authenticator's push-ingest and console side; nil for another authenticator
	// console serves the console read API; built at Start, once the authenticator is known.
	console *console.API
	// incidents opens the incident store for the console, Slack interactions and results.
	incidents *console.Incidents
	server    *http.Server
	wg        sync.WaitGroup
	// draining is set when Shutdown begins: new requests are answered 503 (drain.go).
	draining atomic.Bool

	// ids recognises the request ids of agent calls; nil until the deployment's key is
	// loaded (see loadIssuer), and results are not marked unmatched meanwhile.
	ids     atomic.Pointer[requestid.Issuer]
	stopIDs context.CancelFunc

	// results counts agent results in the projects' ledgers (results.go).
	results    resultCounts
	stopLedger context.CancelFunc

	// refusals counts the records this receiver refuses for an account's limits
	// (refusals.go); stopRefusals ends its flushes.
	refusals     *usage.RefusalCounter
	stopRefusals context.CancelFunc
}

func newReceiver(cfg *Config, set receiver.Settings) (*ingestReceiver, error) {
	obs, err := receiverhelper.NewObsReport(receiverhelper.ObsReportSettings{
		ReceiverID:             set.ID,
		Transport:              "http",
		ReceiverCreateSettings: set,
	})
	if err != nil {
		return nil, err
	}
	return &ingestReceiver{cfg: cfg, settings: set, obs: obs, admit: newAdmission(cfg.MaxInflightBytes, perAccount(cfg)),
		refusals: usage.NewRefusalCounter(nil), incidents: &console.Incidents{Logger: set.Logger}}, nil
}

func (r *ingestReceiver) Start(ctx context.Context, host component.Host) error {
	auth, err := r.cfg.Auth.Get().Config.GetServerAuthenticator(ctx, host.GetExtensions())
	if err != nil {
		return err
	}
	r.auth = auth
	r.dp, _ = auth.(dataPlaneAuth)
	if r.dp == nil {
		r.settings.Logger.Error("the authenticator is not the projectauth extension: push ingest and console reads answer 500 until it is")
	}
	r.console = r.newConsole()
	// The receiver calls the authenticator itself instead of letting confighttp do it, so
	// it can answer in the contract's error shape (missing vs invalid key, 503 while the
	// key mirror loads) and choose per path how a request is authenticated.
	sc := r.cfg.ServerConfig
	sc.Auth = configoptional.None[confighttp.AuthConfig]()
	ln, err := sc.ToListener(ctx)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", sc.NetAddr.Endpoint, err)
	}
	r.server, err = sc.ToServer(ctx, host.GetExtensions(), r.settings.TelemetrySettings, r.routes(),
		confighttp.WithErrorHandler(r.transportError))
	if err != nil {
		_ = ln.Close()
		return err
	}
	r.settings.Logger.Info("ingest receiver listening", zap.String("endpoint", ln.Addr().String()))
	if r.dp != nil {
		r.startIssuer(r.dp.JetStream())
		r.startLedger(r.dp.JetStream())
		r.startRefusals(r.dp.JetStream())
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		if err := r.server.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			componentstatus.ReportStatus(host, componentstatus.NewFatalErrorEvent(err))
		}
	}()
	return nil
}

func (r *ingestReceiver) Shutdown(ctx context.Context) error {
	var err error
	if r.server != nil {
		err = r.drain(ctx)
	}
	if r.stopIDs != nil {
		r.stopIDs()
	}
	if r.stopLedger != nil {
		r.stopLedger()
	}
	if r.stopRefusals != nil {
		r.stopRefusals() // after a last flush
	}
	r.wg.Wait()
	// The server is closed: no result is counted after this flush. Counts NATS cannot
	// take now are lost, which must not fail the collector's shutdown.
	if cerr := r.results.close(ctx); cerr != nil {
		r.settings.Logger.Warn("the ledger could not store the last agent results' counts", zap.Error(cerr))
	}
	return err
}

func (r *ingestReceiver) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/logs", r.handleLogs)
	mux.HandleFunc("/v1/traces", r.handleTraces)
	mux.HandleFunc("/v1/metrics", r.handleMetrics)
	mux.HandleFunc("/v1/events", r.handleEvent)
	mux.HandleFunc("/v1/events/batch", r.handleEventBatch)
	mux.HandleFunc("/internal/agent-output", r.handleAgentOutput)
	mux.HandleFunc(pushPrefix, r.handlePush)
	mux.HandleFunc(slackInteractionsPattern, r.handleSlackInteraction)
	r.console.Register(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, req *http.Request) {
		apierror.Write(w, apierror.New(http.StatusNotFound, apierror.NotFound,
			fmt.Sprintf("no endpoint %s; see the receiver's README for its paths", req.URL.Path)))
	})
	return r.refuseWhileDraining(r.bodyLimits(mux))
}

func (r *ingestReceiver) newConsole() *console.API {
	set := console.Settings{Refuse: r.authRefusal, RetryAfter: r.cfg.RetryAfter, Logger: r.settings.Logger,
		PipelineDurable: r.cfg.DeliveryLog.PipelineDurable, SinkDurable: r.cfg.DeliveryLog.SinkDurable,
		ReplayReplicas: r.cfg.DeliveryLog.ReplayReplicas, MaxRecordBytes: r.cfg.Console.MaxRecordBytes, Incidents: r.incidents}
	// Validate checked them.
	set.AllowedOrigins, _ = console.ParseOrigins(r.cfg.Console.AllowedOrigins)
	if r.dp != nil {
		set.Auth = r.dp
	}
	return console.New(set)
}

// authenticate resolves the request's API key to its project.
func (r *ingestReceiver) authenticate(req *http.Request) (context.Context, *apierror.Error) {
	ctx, err := r.auth.Authenticate(req.Context(), req.Header)
	return r.authOutcome(ctx, err)
}

// authOutcome answers an authentication's refusal in the contract's shape.
func (r *ingestReceiver) authOutcome(ctx context.Context, err error) (context.Context, *apierror.Error) {
	if err == nil {
		if _, ok := principal.FromContext(ctx); ok {
			return ctx, nil
		}
		err = principal.ErrInvalidKey
	}
	switch {
	case errors.Is(err, principal.ErrMissingKey):
		return nil, apierror.New(http.StatusUnauthorized, apierror.MissingAPIKey, "no API key: send your project's key in the X-API-Key header")
	case errors.Is(err, principal.ErrNotReady):
		e := apierror.New(http.StatusServiceUnavailable, apierror.Unavailable, "the receiver is still loading its key configuration; retry in a moment")
		e.RetryAfter = r.cfg.RetryAfter
		return nil, e
	case errors.Is(err, principal.ErrInsufficientScope):
		return nil, apierror.New(http.StatusForbidden, apierror.InsufficientScope, principal.Message(err, "the API key lacks the scope this needs"))
	default:
		return nil, apierror.New(http.StatusUnauthorized, apierror.InvalidAPIKey, "the API key is not valid: it is unknown, revoked, or not a project key")
	}
}

// consumeError is what a client is told when the pipeline could not store its records.
// Everything but a permanent error is worth retrying.
func (r *ingestReceiver) consumeError(err error) *apierror.Error {
	var throttled *pipelinectx.Throttled
	if errors.As(err, &throttled) {
		// Over the account's month or the project's rate: the exporter refused the request
		// whole, and says when it could pass.
		e := apierror.New(throttled.Status, throttled.Code, throttled.Error())
		e.RetryAfter = throttled.RetryAfter
		return e
	}
	var tooLarge *records.TooLargeError
	if errors.As(err, &tooLarge) {
		return apierror.New(http.StatusRequestEntityTooLarge, apierror.PayloadTooLarge, tooLarge.Error()+" (the exporter's max_record_bytes); nothing was stored")
	}
	if consumererror.IsPermanent(err) {
		r.settings.Logger.Error("records refused permanently by the pipeline", zap.Error(err))
		return apierror.New(http.StatusInternalServerError, apierror.Internal, "the records could not be stored because of a server configuration problem; nothing was stored")
	}
	e := apierror.New(http.StatusServiceUnavailable, apierror.Unavailable, err.Error())
	e.RetryAfter = r.cfg.RetryAfter
	return e
}

// transportError answers failures that happen before our handlers run (an unknown
// Content-Encoding, a corrupt gzip stream, a decompressed body over the limit).
func (r *ingestReceiver) transportError(w http.ResponseWriter, req *http.Request, msg string, status int) {
	code := apierror.InvalidBody
	switch status {
	case http.StatusRequestEntityTooLarge:
		code = apierror.PayloadTooLarge
	case http.StatusUnsupportedMediaType:
		code = apierror.UnsupportedMediaType
	}
	e := apierror.New(status, code, msg)
	if isOTLPPath(req.URL.Path) {
		enc, _ := otlpEncodingOf(req)
		otlphttp.WriteError(w, enc, e)
		return
	}
	apierror.Write(w, e)
}

func isOTLPPath(p string) bool {
	return p == "/v1/logs" || p == "/v1/traces" || p == "/v1/metrics"
}

const jsonContentType = "application/json"

func mediaType(req *http.Request) string {
	mt, _, err := mime.ParseMediaType(req.Header.Get("Content-Type"))
	if err != nil {
		return ""
	}
	return strings.ToLower(mt)
}

func methodNotAllowed(w http.ResponseWriter) *apierror.Error {
	w.Header().Set("Allow", http.MethodPost)
	return apierror.New(http.StatusMethodNotAllowed, apierror.MethodNotAllowed, "only POST is allowed here")
}

// writeQuota sends an accepted request's remaining monthly quota, in the RateLimit header
// fields of the IETF httpapi draft's earlier revisions (the form most clients parse):
// the account's limit, what is left, and seconds until the count resets. Nothing for an
// unlimited or unmetered account.
func writeQuota(w http.ResponseWriter, q *pipelinectx.Quota) {
	if q == nil || q.Limit <= 0 {
		return
	}
	h := w.Header()
	h.Set("RateLimit-Limit", strconv.FormatInt(q.Limit, 10))
	h.Set("RateLimit-Remaining", strconv.FormatInt(max(q.Remaining, 0), 10))
	h.Set("RateLimit-Reset", apierror.RetryAfterSeconds(time.Until(q.Reset)))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
