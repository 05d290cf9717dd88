package projectauthextension

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensionauth"
	"go.opentelemetry.io/collector/extension/extensioncapabilities"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/extension/projectauthextension/internal/metadata"
	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

type authenticator struct {
	cfg    *Config
	logger *zap.Logger
	// cache and js are the configmirror extension's (cfg.Mirror), set at Start.
	cache *mirrorcache.Cache
	js    jetstream.JetStream

	cancel context.CancelFunc
	done   chan struct{}

	tel *metadata.TelemetryBuilder

	// Key usage is reported to the control plane's listings off the request path, at most
	// once per key and usageEvery per process.
	reported sync.Map // key id -> time.Time of the last report
	used     chan string
}

const usageEvery = time.Minute

var (
	_ extensionauth.Server            = (*authenticator)(nil)
	_ extensioncapabilities.Dependent = (*authenticator)(nil)
)

// mirrorExtension is what the configmirror extension offers beside its cache: the NATS
// connection that holds the mirror.
type mirrorExtension interface {
	mirrorcache.Provider
	JetStream() jetstream.JetStream
}

// Dependencies makes the collector start the configmirror extension first, so its cache
// and connection exist when Start takes them.
func (a *authenticator) Dependencies() []component.ID {
	return []component.ID{a.cfg.Mirror}
}

func newAuthenticator(cfg *Config, set extension.Settings) (*authenticator, error) {
	tel, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	return &authenticator{cfg: cfg, logger: set.Logger, tel: tel}, nil
}

func (a *authenticator) Start(_ context.Context, host component.Host) error {
	cache, err := mirrorcache.FromHost(host, a.cfg.Mirror)
	if err != nil {
		return err
	}
	m, ok := host.GetExtensions()[a.cfg.Mirror].(mirrorExtension)
	if !ok || m.JetStream() == nil {
		return fmt.Errorf("the extension %s offers no NATS connection: `mirror` must name a configmirror extension", a.cfg.Mirror)
	}
	a.cache, a.js = cache, m.JetStream()
	if a.cfg.PushIngest.authOff() {
		a.logger.Warn("push-ingest authentication is OFF (push_ingest.auth: off, SVC_INGEST_AUTH=off): anyone who knows a source's ingest URL can post to it; turn it on unless this instance is only reachable by trusted senders")
	} else if a.cfg.PushIngest.ServiceToken != "" {
		a.logger.Info("push ingest also accepts the service ingest token (SERVICE_INGEST_TOKEN) for every source")
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	a.done = make(chan struct{})
	a.used = make(chan string, 1024)
	go func() {
		defer close(a.done)
		a.reportUsage(ctx, a.js)
	}()
	return nil
}

// noteUse queues a key's use for reporting, unless it was reported recently. It never
// blocks a request: when the queue is full the use is simply reported later.
func (a *authenticator) noteUse(keyID string) {
	now := time.Now()
	if last, ok := a.reported.Load(keyID); ok && now.Sub(last.(time.Time)) < usageEvery {
		return
	}
	a.reported.Store(keyID, now)
	select {
	case a.used <- keyID:
	default:
		a.reported.Delete(keyID)
	}
}

func (a *authenticator) reportUsage(ctx context.Context, js jetstream.JetStream) {
	var store *mirror.Store
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-a.used:
			if store == nil {
				var err error
				if store, err = mirror.Open(ctx, js, 1); err != nil {
					a.reported.Delete(id)
					continue
				}
			}
			if err := store.KeyUsed(ctx, id, time.Now()); err != nil {
				a.reported.Delete(id) // report again on next use
			}
		}
	}
}

func (a *authenticator) Shutdown(context.Context) error {
	if a.cancel != nil {
		a.cancel()
		<-a.done
	}
	return nil
}

// MirrorCache is the configmirror extension's cache, which the ingest receiver's console
// reads a project's destinations from. Nil before Start. Components' `mirror` settings
// cannot name this extension (mirrorcache.FromHost refuses it).
func (a *authenticator) MirrorCache() *mirrorcache.Cache { return a.cache }

// Authenticate resolves a project key from the X-API-Key header (HTTP) or x-api-key
// metadata (gRPC), or an Authorization: Bearer header, to its project, for sending OTLP
// and events: the key needs the ingest scope. Ingest-scoped keys are refused here: they
// only open their own source's ingest URL.
func (a *authenticator) Authenticate(ctx context.Context, sources map[string][]string) (context.Context, error) {
	return a.authenticateFor(ctx, sources, mirror.PermIngest)
}

// AuthenticateResults is Authenticate for posting agent results: the key needs the
// results scope instead.
func (a *authenticator) AuthenticateResults(ctx context.Context, sources map[string][]string) (context.Context, error) {
	return a.authenticateFor(ctx, sources, mirror.PermResults)
}

func (a *authenticator) authenticateFor(ctx context.Context, sources map[string][]string, perm string) (context.Context, error) {
	key := lookup(sources, "x-api-key")
	if key == "" {
		key = bearer(lookup(sources, "authorization"))
	}
	p, err := a.resolve(key, perm)
	a.tel.ProjectauthRequests.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome(err))))
	if err != nil {
		return ctx, err
	}
	return principal.NewContext(ctx, p), nil
}

// scopeMessages say, per scope, what a key without it was refused.
var scopeMessages = map[string]string{
	mirror.PermIngest:  "sending OTLP and events with an API key needs the ingest scope; this key does not have it (use a key that has it, or add the scope on the dashboard's Keys page)",
	mirror.PermResults: "posting agent results with an API key needs the results scope; this key does not have it (use a key that has it, or add the scope on the dashboard's Keys page)",
	mirror.PermRead:    "reading stored events and deliveries with an API key needs the read scope; this key does not have it (use a key that has it, or add the scope on the dashboard's Keys page)",
}

func insufficientScope(perm string) error {
	return principal.Refuse(principal.ErrInsufficientScope, scopeMessages[perm])
}

// msgInvalidKey is what gRPC clients are told (the collector sends the error's text as
// the Unauthenticated status message); the ingest receiver tells HTTP clients the same
// words, so one wrong key reads the same over both.
const msgInvalidKey = "the API key is not valid: it is unknown, revoked, or not a project key"

func (a *authenticator) resolve(key, perm string) (principal.Principal, error) {
	if key == "" {
		return principal.Principal{}, principal.ErrMissingKey
	}
	if !a.ready() {
		return principal.Principal{}, principal.ErrNotReady
	}
	e, ok := a.cache.Key(apikey.Hash(key))
	if !ok || e.Scope != mirror.ScopeProject {
		return principal.Principal{}, principal.Refuse(principal.ErrInvalidKey, msgInvalidKey)
	}
	if !e.Allows(perm) {
		return principal.Principal{}, insufficientScope(perm)
	}
	a.noteUse(e.KeyID)
	return principal.Principal{ProjectID: e.ProjectID, KeyID: e.KeyID, AccountID: e.AccountID, Scope: e.Scope}, nil
}

// ready reports whether the mirror has loaded; before Start there is none.
func (a *authenticator) ready() bool { return a.cache != nil && a.cache.Ready() }

func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, principal.ErrMissingKey):
		return "missing_key"
	case errors.Is(err, principal.ErrNotReady):
		return "not_ready"
	case errors.Is(err, principal.ErrNotFound):
		return "not_found"
	case errors.Is(err, principal.ErrInvalidToken):
		return "invalid_token"
	case errors.Is(err, ErrForbidden):
		return "forbidden"
	case errors.Is(err, principal.ErrInsufficientScope):
		return "insufficient_scope"
	default:
		return "invalid_key"
	}
}

// lookup finds a header or metadata value whatever its case: HTTP canonicalises names
// (X-Api-Key), gRPC lowercases them.
func lookup(sources map[string][]string, name string) string {
	if v := sources[name]; len(v) > 0 {
		return strings.TrimSpace(v[0])
	}
	for k, v := range sources {
		if len(v) > 0 && strings.EqualFold(k, name) {
			return strings.TrimSpace(v[0])
		}
	}
	return ""
}

func bearer(h string) string {
	const p = "bearer "
	if len(h) > len(p) && strings.EqualFold(h[:len(p)], p) {
		return strings.TrimSpace(h[len(p):])
	}
	return ""
}
