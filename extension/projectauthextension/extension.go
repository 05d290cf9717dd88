package projectauthextension

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
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
	"github.com/otelcol-svc/otelcol-svc/internal/collector/validationresponder"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

type authenticator struct {
	cfg    *Config
	logger *zap.Logger
	cache  *mirrorcache.Cache

	nc     *nats.Conn
	js     jetstream.JetStream
	cancel context.CancelFunc
	done   chan struct{}

	// validator answers the control plane's pipeline checks.
	validator micro.Service

	tel *metadata.TelemetryBuilder

	// Key usage is reported to the control plane's listings off the request path, at most
	// once per key and usageEvery per process.
	reported sync.Map // key id -> time.Time of the last report
	used     chan string
}

const usageEvery = time.Minute

var (
	_ extensionauth.Server            = (*authenticator)(nil)
	_ mirrorcache.Provider            = (*authenticator)(nil)
	_ extensioncapabilities.Dependent = (*authenticator)(nil)
)

// Dependencies makes the collector start the embedded NATS first when we use it (an
// empty nats.url), so the key mirror loads at once instead of after retries. Without the
// extension configured, the collector refuses the config with a message naming it.
func (a *authenticator) Dependencies() []component.ID {
	if a.cfg.NATS.URL == "" {
		return []component.ID{a.cfg.NATS.Extension}
	}
	return nil
}

func newAuthenticator(cfg *Config, set extension.Settings) (*authenticator, error) {
	tel, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	return &authenticator{cfg: cfg, logger: set.Logger, cache: mirrorcache.NewCache(set.Logger), tel: tel}, nil
}

func (a *authenticator) Start(_ context.Context, host component.Host) error {
	nc, js, err := a.cfg.NATS.ConnectJetStream(host, "otelcol-svc projectauth", a.logger)
	if err != nil {
		return err
	}
	a.nc, a.js = nc, js
	// Every role answers the control plane's pipeline checks (internal/validation); a
	// failure here leaves the other collectors to answer, so it does not stop this one.
	if a.validator, err = validationresponder.Start(nc, validationresponder.WithBacklogs(js, a.cache, validationresponder.OptionsFromEnv())); err != nil {
		a.logger.Error("pipeline checks for the control plane not served", zap.Error(err))
	}
	if a.cfg.PushIngest.authOff() {
		a.logger.Warn("push-ingest authentication is OFF (push_ingest.auth: off, SVC_INGEST_AUTH=off): anyone who knows a source's ingest URL can post to it; turn it on unless this instance is only reachable by trusted senders")
	} else if a.cfg.PushIngest.ServiceToken != "" {
		a.logger.Info("push ingest also accepts the service ingest token (SERVICE_INGEST_TOKEN) for every source")
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	a.done = make(chan struct{})
	a.used = make(chan string, 1024)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		a.cache.Run(ctx, js)
	}()
	go func() {
		defer wg.Done()
		a.reportUsage(ctx, js)
	}()
	go func() {
		wg.Wait()
		close(a.done)
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
	// Close the connection first: stopping the KV watchers makes JetStream API calls,
	// which would each wait out their timeout while NATS is unreachable.
	if a.validator != nil {
		_ = a.validator.Stop()
	}
	if a.nc != nil {
		a.nc.Close()
	}
	if a.cancel != nil {
		a.cancel()
		<-a.done
	}
	return nil
}

// MirrorCache implements mirrorcache.Provider.
func (a *authenticator) MirrorCache() *mirrorcache.Cache { return a.cache }

// Authenticate resolves a project key from the X-API-Key header (HTTP) or x-api-key
// metadata (gRPC), or an Authorization: Bearer header, to its project. Ingest-scoped keys
// are refused here: they only open their own source's ingest URL.
func (a *authenticator) Authenticate(ctx context.Context, sources map[string][]string) (context.Context, error) {
	key := lookup(sources, "x-api-key")
	if key == "" {
		key = bearer(lookup(sources, "authorization"))
	}
	p, err := a.resolve(key)
	a.tel.ProjectauthRequests.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome(err))))
	if err != nil {
		return ctx, err
	}
	return principal.NewContext(ctx, p), nil
}

// msgInvalidKey is what gRPC clients are told (the collector sends the error's text as
// the Unauthenticated status message); the ingest receiver tells HTTP clients the same
// words, so one wrong key reads the same over both.
const msgInvalidKey = "the API key is not valid: it is unknown, revoked, or not a project key"

func (a *authenticator) resolve(key string) (principal.Principal, error) {
	if key == "" {
		return principal.Principal{}, principal.ErrMissingKey
	}
	if !a.cache.Ready() {
		return principal.Principal{}, principal.ErrNotReady
	}
	e, ok := a.cache.Key(apikey.Hash(key))
	if !ok || e.Scope != mirror.ScopeProject {
		return principal.Principal{}, principal.Refuse(principal.ErrInvalidKey, msgInvalidKey)
	}
	a.noteUse(e.KeyID)
	return principal.Principal{ProjectID: e.ProjectID, KeyID: e.KeyID, AccountID: e.AccountID, Scope: e.Scope}, nil
}

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
