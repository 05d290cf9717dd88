// Command controlplane is otelcol-svc's control plane: users, projects, API keys, members,
// pipeline and sink configuration. It owns the configuration and mirrors what the data
// plane needs into NATS KV; it never handles an event payload.
//
// Settings come from the environment (see the README's settings table).
//
// The control plane links no collector code (a test checks `go list -deps`): it writes
// the configuration mirror through internal/mirror's schema, and has pipelines' OTTL
// checked by a running collector over NATS (internal/validation).
package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/controlplane/api"
	"github.com/otelcol-svc/otelcol-svc/controlplane/auth"
	"github.com/otelcol-svc/otelcol-svc/controlplane/service"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/mailer"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/outbound"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/internal/usage"
	"github.com/otelcol-svc/otelcol-svc/internal/validation"
)

// defaultNATSURL is where the embedded NATS of the collector's default config listens.
const defaultNATSURL = "nats://127.0.0.1:4223"

// version is set at link time (-ldflags "-X main.version=..." from `git describe`, as
// deploy/docker/build.sh does) so that a running control plane says which build it is.
var version = "dev"

func main() {
	// One logger family, log/slog: the control plane is a plain Go program, not a
	// collector, so it has no use for zap (the collector's), and slog is what its HTTP and
	// MCP libraries take. Every line is JSON on stderr.
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel()}))
	if len(os.Args) == 2 && (os.Args[1] == "--version" || os.Args[1] == "-version" || os.Args[1] == "version") {
		fmt.Println("controlplane", version)
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "accounts" {
		os.Exit(accounts(os.Args[2:], os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 {
		fmt.Fprintf(os.Stderr, "unknown command %q\n\n%s", os.Args[1], accountsUsage)
		os.Exit(exitUsage)
	}
	if err := run(logger); err != nil {
		logger.Error("control plane stopped", "error", err)
		os.Exit(1)
	}
}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func logLevel() slog.Level {
	var l slog.Level
	_ = l.UnmarshalText([]byte(env("SVC_LOG_LEVEL", "info")))
	return l
}

func run(logger *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	db, err := store.Open(ctx, env("SVC_DATA_DIR", "./data"), os.Getenv("DATABASE_URL"))
	if err != nil {
		return err
	}
	defer db.Close()

	secret, err := jwtSecret(ctx, db)
	if err != nil {
		return err
	}
	ttl, err := time.ParseDuration(env("SVC_TOKEN_TTL", "24h"))
	if err != nil {
		return fmt.Errorf("SVC_TOKEN_TTL: %w", err)
	}
	tokens, err := auth.NewTokens(secret, ttl)
	if err != nil {
		return err
	}

	natsURL := env("NATS_URL", defaultNATSURL)
	nc, err := connectNATS(natsURL, logger)
	if err != nil {
		return err
	}
	defer nc.Close()
	replicas, _ := strconv.Atoi(env("SVC_MIRROR_REPLICAS", "1"))
	freeTier, err := freeTierEvents()
	if err != nil {
		return err
	}
	m := &mirrorConn{nc: nc, replicas: replicas, freeTier: freeTier}
	maxProjects, err := maxProjectsPerAccount()
	if err != nil {
		return err
	}

	receiverURL, err := publicURL(env("SVC_PUBLIC_RECEIVER_URL", "http://localhost:4318"))
	if err != nil {
		return fmt.Errorf("SVC_PUBLIC_RECEIVER_URL: %w", err)
	}
	consoleKey, err := consoleKey(ctx, db)
	if err != nil {
		return err
	}

	limits, err := streamLimits()
	if err != nil {
		return err
	}
	// The collector's agent and sink calls read the same variable: what it may call, the
	// control plane lets users save.
	outboundAllow, err := outbound.ParseAllow(os.Getenv(outbound.EnvAllow))
	if err != nil {
		return err
	}
	slackAPIURL, err := service.SlackAPIURL(os.Getenv("SVC_SLACK_API_URL"))
	if err != nil {
		return fmt.Errorf("SVC_SLACK_API_URL: %w", err)
	}
	var synced atomic.Bool
	svc := &service.Service{Store: db, Logger: logger, Mirror: m.get, ReceiverURL: receiverURL, ConsoleKey: consoleKey,
		StreamLimits: limits, OutboundAllow: outboundAllow, SlackAPIURL: slackAPIURL, Usage: m.usage, MaxProjects: maxProjects,
		CheckPipeline: func(ctx context.Context, p mirror.Pipeline) (validation.Result, error) {
			return validation.Check(ctx, nc, p)
		},
		CheckProjectPipeline: func(ctx context.Context, projectID string, p mirror.Pipeline) (validation.Result, error) {
			return validation.CheckProject(ctx, nc, projectID, p)
		}}
	srv := &api.Server{Svc: svc, Tokens: tokens, Logger: logger, MirrorSynced: synced.Load}
	if srv.TrustedProxies, err = auth.ParseTrustedProxies(os.Getenv("SVC_TRUSTED_PROXIES")); err != nil {
		return err
	}
	if v := os.Getenv("SVC_PUBLIC_URL"); v != "" {
		if srv.PublicURL, err = publicURL(v); err != nil {
			return fmt.Errorf("SVC_PUBLIC_URL: %w", err)
		}
	}
	smtp, err := mailer.Parse(os.Getenv(mailer.EnvURL), os.Getenv(mailer.EnvFrom))
	if err != nil {
		return err
	}
	if smtp.Host != "" && srv.PublicURL == "" {
		return fmt.Errorf("%s needs SVC_PUBLIC_URL: mailed links must name the address users reach the dashboard at", mailer.EnvURL)
	}
	srv.Email = &service.Email{Svc: svc, Mailer: mailer.New(smtp), PublicURL: srv.PublicURL, Logger: logger}
	if smtp.Host != "" {
		logger.Info("email on", "smtp", smtp.Server(), "from", smtp.From)
	} else {
		logger.Info("email off: no verification, invitations or password reset by email (set " + mailer.EnvURL + " and " + mailer.EnvFrom + ")")
	}
	// Usage thresholds and failed deliveries are mailed to owners as well as told to the
	// projects' destinations; nothing runs when email is off.
	noticesCtx, stopNotices := context.WithCancel(ctx)
	waitNotices := srv.Email.WatchNotices(noticesCtx, func(ctx context.Context) (jetstream.JetStream, error) {
		_, js, err := m.get(ctx)
		return js, err
	})
	defer func() { stopNotices(); waitNotices() }()
	// A wrong single sign-on setting stops the start, as a wrong SMTP URL does: an
	// operator who set SVC_OIDC_* expects the login page's button, not a log line.
	sso, err := service.SSOConfigFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	if sso.Issuer != "" {
		srv.SSO = service.NewSSO(svc, sso, svc.OutboundAllow, logger)
		logger.Info("single sign-on on", "issuer", sso.Issuer, "name", sso.Name)
	}
	drainDelay, drainTimeout, err := drainSettings()
	if err != nil {
		return err
	}
	var stopping atomic.Bool
	httpSrv := &http.Server{
		Addr:              env("SVC_CONTROLPLANE_LISTEN", "0.0.0.0:8080"),
		Handler:           notReadyWhileStopping(&stopping, srv.Handler()),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	svc.PruneGrace, err = time.ParseDuration(env("SVC_MIRROR_PRUNE_GRACE", "1m"))
	if err != nil || svc.PruneGrace < 0 {
		return fmt.Errorf("SVC_MIRROR_PRUNE_GRACE: want a duration such as 1m (0s prunes at once), got %q", os.Getenv("SVC_MIRROR_PRUNE_GRACE"))
	}
	checkEvery, err := time.ParseDuration(env("SVC_MIRROR_CHECK_INTERVAL", "1m"))
	if err != nil || checkEvery <= 0 {
		return fmt.Errorf("SVC_MIRROR_CHECK_INTERVAL: want a positive duration such as 1m, got %q", os.Getenv("SVC_MIRROR_CHECK_INTERVAL"))
	}
	go resyncLoop(ctx, svc, m, logger, &synced, checkEvery)
	go oauthSweepLoop(ctx, svc, logger)
	auditRetention, err := service.ParseRetention(env("SVC_AUDIT_RETENTION", "90d"))
	if err != nil {
		return fmt.Errorf("SVC_AUDIT_RETENTION: %w", err)
	}
	go svc.SweepAuditLoop(ctx, auditRetention, time.Hour)
	// Replays and reads at the receivers reach the audit log through the svc-audit
	// stream, read by one durable consumer all control planes share.
	replays, err := svc.WatchReplays(nc)
	if err != nil {
		return fmt.Errorf("watching replays for the audit log: %w", err)
	}
	defer replays.Unsubscribe() //nolint:errcheck

	errc := make(chan error, 1)
	go func() { errc <- httpSrv.ListenAndServe() }()
	logger.Info("control plane listening", "version", version, "addr", httpSrv.Addr, "database", db.Kind(), "nats", streams.RedactURLs(natsURL))
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Readiness goes first, so load balancers stop sending here while the listener still
	// serves; then the requests being handled get drainTimeout to complete.
	stopping.Store(true)
	logger.Info("shutting down: /readyz answers 503; the listener closes after the drain delay",
		"drain_delay", drainDelay, "drain_timeout", drainTimeout)
	time.Sleep(drainDelay)
	sctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	if err := httpSrv.Shutdown(sctx); err != nil {
		logger.Warn("requests still being handled at the end of the drain were cut off", "error", err)
		_ = httpSrv.Close()
	}
	return nil
}

// drainSettings are SVC_DRAIN_DELAY (default 2s), how long /readyz answers 503 before
// the listener closes, and SVC_DRAIN_TIMEOUT (default 5s), how long requests being
// handled then get to complete: the collector's settings of the same names.
func drainSettings() (delay, timeout time.Duration, err error) {
	delay, err = time.ParseDuration(env("SVC_DRAIN_DELAY", "2s"))
	if err != nil || delay < 0 {
		return 0, 0, fmt.Errorf("SVC_DRAIN_DELAY: want a duration such as 2s (0s closes at once), got %q", os.Getenv("SVC_DRAIN_DELAY"))
	}
	timeout, err = time.ParseDuration(env("SVC_DRAIN_TIMEOUT", "5s"))
	if err != nil || timeout < 0 {
		return 0, 0, fmt.Errorf("SVC_DRAIN_TIMEOUT: want a duration such as 5s, got %q", os.Getenv("SVC_DRAIN_TIMEOUT"))
	}
	return delay, timeout, nil
}

// notReadyWhileStopping answers /readyz 503 once the process is stopping; everything
// else is still served until the listener closes.
func notReadyWhileStopping(stopping *atomic.Bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if stopping.Load() && strings.TrimSuffix(r.URL.Path, "/") == "/readyz" {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(map[string]any{"status": "stopping",
				"error": map[string]string{"code": apierror.Unavailable, "message": "the control plane is shutting down"}})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// streamLimits are those of a new project's streams: the collector's settings of the same
// names (SVC_STREAM_MAX_AGE, SVC_STREAM_REPLICAS), so both create the same streams.
func streamLimits() (streams.Limits, error) {
	l := streams.DefaultLimits()
	if v := os.Getenv("SVC_STREAM_MAX_AGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return l, fmt.Errorf("SVC_STREAM_MAX_AGE: %w", err)
		}
		l.MaxAge = d
	}
	if v := os.Getenv("SVC_STREAM_REPLICAS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return l, fmt.Errorf("SVC_STREAM_REPLICAS: %w", err)
		}
		l.Replicas = n
	}
	if err := l.Validate(); err != nil {
		return l, fmt.Errorf("stream settings: %w", err)
	}
	return l, nil
}

// jwtSecret is SVC_JWT_SECRET, else a secret generated once and kept in the database, so
// every control plane on the same database signs and accepts the same tokens.
func jwtSecret(ctx context.Context, db *store.Store) ([]byte, error) {
	if s := os.Getenv("SVC_JWT_SECRET"); s != "" {
		if len(s) < 32 {
			return nil, errors.New("SVC_JWT_SECRET must be at least 32 characters")
		}
		return []byte(s), nil
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	var secret string
	err := db.InTx(ctx, func(tx *store.Tx) error {
		var err error
		secret, err = tx.SetSettingOnce(ctx, "jwt_secret", hex.EncodeToString(b[:]))
		return err
	})
	return []byte(secret), err
}

// consoleKey is the Ed25519 key that signs console tokens, generated once and kept in
// the database like the JWT secret, so every control plane on the same database signs
// with the same key (and publishes the same public key).
func consoleKey(ctx context.Context, db *store.Store) (ed25519.PrivateKey, error) {
	seed := make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		return nil, err
	}
	var stored string
	err := db.InTx(ctx, func(tx *store.Tx) error {
		var err error
		stored, err = tx.SetSettingOnce(ctx, "console_token_ed25519_seed", base64.StdEncoding.EncodeToString(seed))
		return err
	})
	if err != nil {
		return nil, err
	}
	seed, err = base64.StdEncoding.DecodeString(stored)
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, errors.New("the console token key stored in the database (setting console_token_ed25519_seed) is damaged")
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// publicURL checks an address users are told (an absolute http(s) URL) and drops a
// trailing slash, so paths can be appended.
func publicURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%q must be an absolute http:// or https:// URL such as https://ingest.example.com", s)
	}
	return strings.TrimRight(s, "/"), nil
}

// freeTierEvents is SVC_FREE_TIER_EVENTS, the receivers' default monthly limit per
// account (0: unlimited), which the control plane shows for accounts without their own.
func freeTierEvents() (int64, error) {
	v := env("SVC_FREE_TIER_EVENTS", "10000")
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("SVC_FREE_TIER_EVENTS: want 0 (unlimited) or a number of events per month, got %q", v)
	}
	return n, nil
}

// defaultMaxProjects is the free tier's number of projects an account may own: enough
// for a team's environments, few enough that one signup cannot fill the service's
// stream store.
const defaultMaxProjects = 10

// maxProjectsPerAccount is SVC_MAX_PROJECTS_PER_ACCOUNT (0: no limit).
func maxProjectsPerAccount() (int64, error) {
	v := env("SVC_MAX_PROJECTS_PER_ACCOUNT", strconv.Itoa(defaultMaxProjects))
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("SVC_MAX_PROJECTS_PER_ACCOUNT: want 0 (no limit) or a number of projects, got %q", v)
	}
	return n, nil
}

// mirrorConn opens the mirror's buckets (and the usage reader) once NATS is reachable.
type mirrorConn struct {
	nc       *nats.Conn
	replicas int
	freeTier int64
	mu       sync.Mutex
	ms       *mirror.Store
	js       jetstream.JetStream
	ur       *usage.Reader
}

// usage returns the reader of the receivers' usage counts, opening its buckets (created
// with the mirror's replicas when no receiver has yet) on first use.
func (m *mirrorConn) usage(ctx context.Context) (*usage.Reader, error) {
	_, js, err := m.get(ctx)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ur == nil {
		if m.ur, err = usage.OpenReader(ctx, js, m.freeTier, m.replicas); err != nil {
			return nil, err
		}
	}
	return m.ur, nil
}

func (m *mirrorConn) get(ctx context.Context) (*mirror.Store, jetstream.JetStream, error) {
	if !m.nc.IsConnected() {
		return nil, nil, errors.New("NATS is not connected")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ms != nil {
		return m.ms, m.js, nil
	}
	js, err := jetstream.New(m.nc)
	if err != nil {
		return nil, nil, err
	}
	ms, err := mirror.Open(ctx, js, m.replicas)
	if err != nil {
		return nil, nil, err
	}
	m.ms, m.js = ms, js
	return ms, js, nil
}

// reset forgets the opened buckets, so the next use opens (creating) them again.
func (m *mirrorConn) reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ms, m.js, m.ur = nil, nil, nil
}

// resyncLoop publishes the whole configuration at start (as soon as NATS is reachable),
// and again whenever the mirror's buckets were created anew (a new or wiped NATS), checked
// every SVC_MIRROR_CHECK_INTERVAL (1m), so such a NATS is repaired without anyone noticing. Between those only
// the API's own writes change the mirror: rewriting every entry on a timer would make
// every data-plane process re-read thousands of projects each time.
//
// Each check also publishes the recorded revocations not yet published. The control
// plane that records one publishes it and retries, but one killed after the commit, or
// cut off from NATS while the others are not, leaves it unpublished, and console tokens
// of the revoked credential would live out their ten minutes; every control plane
// sharing the database picks it up within a check instead. With nothing unpublished it
// is one small query.
func resyncLoop(ctx context.Context, svc *service.Service, m *mirrorConn, logger *slog.Logger, published *atomic.Bool, checkEvery time.Duration) {
	// Retries after a failed publish back off from a second to checkEvery. No jitter: one
	// control plane per NATS has nobody to fall in step with.
	retry := &backoff.ExponentialBackOff{InitialInterval: min(time.Second, checkEvery), Multiplier: 2, MaxInterval: checkEvery}
	retry.Reset()
	wait := 200 * time.Millisecond
	synced := false
	var generation string
	var lastFull time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if synced {
			gen, err := svc.MirrorGeneration(ctx)
			if err == nil && gen == generation && time.Since(lastFull) < fullResyncEvery {
				if left, err := svc.PublishPendingRevocations(ctx); err != nil {
					logger.Warn("pending revocations not published; next check retries", "credentials", left, "error", err)
				}
				wait = checkEvery
				continue
			}
			if err != nil {
				// A bucket is gone: open (and so create) them again before publishing.
				m.reset()
			}
		}
		err := svc.Resync(ctx)
		if err == nil {
			generation, err = svc.MirrorGeneration(ctx)
		}
		switch {
		case err == nil:
			if !synced {
				logger.Info("configuration mirror published")
			} else {
				logger.Info("configuration mirror published again (its buckets were created anew)")
			}
			synced, wait, lastFull = true, checkEvery, time.Now()
			retry.Reset()
			published.Store(true)
		default:
			logger.Warn("configuration mirror not published; retrying", "error", err)
			m.reset()
			wait = retry.NextBackOff()
		}
	}
}

// oauthSweepLoop deletes expired OAuth requests, codes and tokens, and expired
// revocations, every hour. Each is refused (or has no token left to end) once expired
// anyway; this bounds the rows nobody reads.
func oauthSweepLoop(ctx context.Context, svc *service.Service, logger *slog.Logger) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n, err := svc.SweepOAuth(ctx); err != nil {
			logger.Warn("OAuth sweep failed; next in an hour", "error", err)
		} else if n > 0 {
			logger.Info("OAuth sweep", "deleted", n)
		}
		// Expired revocations go too; without a failed publish or a restart nothing else
		// deletes them before the next full publish.
		if err := svc.SweepRevocations(ctx); err != nil {
			logger.Warn("revocation sweep failed; next in an hour", "error", err)
		}
	}
}

// fullResyncEvery is how often the whole configuration is published even though the
// mirror's buckets look unchanged: a repair for entries lost some other way.
const fullResyncEvery = 6 * time.Hour

// connectNATS connects to the mirror's NATS, and keeps reconnecting for as long as the
// process runs: the API serves reads while NATS is away, and changes come back with it.
func connectNATS(url string, logger *slog.Logger) (*nats.Conn, error) {
	nc, err := nats.Connect(url,
		nats.Name("otelcol-svc controlplane"),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		// No buffering while disconnected: a mirror write fails at once, and its change is
		// refused with 503, instead of waiting in a buffer.
		nats.ReconnectBufSize(-1),
		nats.Timeout(2*time.Second),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				logger.Warn("NATS disconnected", "error", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			logger.Info("NATS reconnected", "server", nc.ConnectedUrlRedacted())
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			logger.Warn("NATS error", "error", err)
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("nats connect: %w", err)
	}
	return nc, nil
}
