// Command controlplane is otelcol-svc's control plane: users, projects, API keys, members,
// pipeline and sink configuration. It owns the configuration and mirrors what the data
// plane needs into NATS KV; it never handles an event payload.
//
// Settings come from the environment (see the README's settings table).
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/components/mirror"
	"github.com/otelcol-svc/otelcol-svc/components/natsclient"
	"github.com/otelcol-svc/otelcol-svc/controlplane/api"
	"github.com/otelcol-svc/otelcol-svc/controlplane/auth"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
)

func main() {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel()}))
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

	natsURL := env("NATS_URL", natsclient.DefaultURL)
	nc, err := natsclient.Config{URL: natsURL}.Connect(nil, "otelcol-svc controlplane", zap.NewNop())
	if err != nil {
		return err
	}
	defer nc.Close()
	replicas, _ := strconv.Atoi(env("SVC_MIRROR_REPLICAS", "1"))
	m := &mirrorConn{nc: nc, replicas: replicas}

	srv := &api.Server{Store: db, Tokens: tokens, Logger: logger, Mirror: m.get}
	httpSrv := &http.Server{
		Addr:              env("SVC_CONTROLPLANE_LISTEN", "0.0.0.0:8080"),
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	go resyncLoop(ctx, srv, logger)

	errc := make(chan error, 1)
	go func() { errc <- httpSrv.ListenAndServe() }()
	logger.Info("control plane listening", "addr", httpSrv.Addr, "database", db.Kind(), "nats", natsURL)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return httpSrv.Shutdown(sctx)
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

// mirrorConn opens the mirror's buckets once NATS is reachable.
type mirrorConn struct {
	nc       *nats.Conn
	replicas int
	mu       sync.Mutex
	ms       *mirror.Store
	js       jetstream.JetStream
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

// resyncLoop re-publishes the configuration at start (as soon as NATS is reachable) and
// every minute, so a new or wiped NATS is repaired without anyone noticing.
func resyncLoop(ctx context.Context, srv *api.Server, logger *slog.Logger) {
	wait := 200 * time.Millisecond
	synced := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		err := srv.Resync(ctx)
		switch {
		case err == nil && !synced:
			logger.Info("configuration mirror published")
			synced, wait = true, time.Minute
		case err == nil:
			wait = time.Minute
		default:
			logger.Warn("configuration mirror not published; retrying", "error", err)
			wait = min(max(wait*2, time.Second), time.Minute)
		}
	}
}
