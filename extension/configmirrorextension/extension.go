package configmirrorextension

import (
	"context"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensioncapabilities"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/validationresponder"
)

type configMirror struct {
	cfg    *Config
	logger *zap.Logger
	cache  *mirrorcache.Cache

	nc     *nats.Conn
	js     jetstream.JetStream
	cancel context.CancelFunc
	done   chan struct{}

	// validator answers the control plane's pipeline checks and backlog previews.
	validator micro.Service
}

var (
	_ mirrorcache.Provider            = (*configMirror)(nil)
	_ extensioncapabilities.Dependent = (*configMirror)(nil)
)

func newConfigMirror(cfg *Config, set extension.Settings) *configMirror {
	return &configMirror{cfg: cfg, logger: set.Logger, cache: mirrorcache.NewCache(set.Logger)}
}

// Dependencies makes the collector start the embedded NATS first when we use it (an
// empty nats.url), so the mirror loads at once instead of after retries. Without the
// extension configured, the collector refuses the config with a message naming it.
func (m *configMirror) Dependencies() []component.ID {
	if m.cfg.NATS.URL == "" {
		return []component.ID{m.cfg.NATS.Extension}
	}
	return nil
}

func (m *configMirror) Start(_ context.Context, host component.Host) error {
	// The connection reports a lost NATS as this extension's recoverable error, which is
	// what makes the health check answer 500 while the mirror cannot be kept current.
	nc, js, err := m.cfg.NATS.ConnectJetStream(host, "otelcol-svc configmirror", m.logger)
	if err != nil {
		return err
	}
	m.nc, m.js = nc, js
	// Every role answers the control plane's pipeline checks (internal/validation); a
	// failure here leaves the other collectors to answer, so it does not stop this one.
	if m.validator, err = validationresponder.Start(nc, validationresponder.WithBacklogs(js, m.cache, validationresponder.OptionsFromEnv())); err != nil {
		m.logger.Error("pipeline checks for the control plane not served", zap.Error(err))
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.done = make(chan struct{})
	go func() {
		defer close(m.done)
		m.cache.Run(ctx, js)
	}()
	return nil
}

func (m *configMirror) Shutdown(context.Context) error {
	// Close the connection first: stopping the KV watchers makes JetStream API calls,
	// which would each wait out their timeout while NATS is unreachable.
	if m.validator != nil {
		_ = m.validator.Stop()
	}
	if m.nc != nil {
		m.nc.Close()
	}
	if m.cancel != nil {
		m.cancel()
		<-m.done
	}
	return nil
}

// MirrorCache implements mirrorcache.Provider: the one copy of the mirror in the process.
func (m *configMirror) MirrorCache() *mirrorcache.Cache { return m.cache }

// JetStream is the connection to the NATS that holds the mirror and the streams; the
// projectauth extension reports key use and lends the ingest receiver console reads
// through it. Nil before Start.
func (m *configMirror) JetStream() jetstream.JetStream { return m.js }
