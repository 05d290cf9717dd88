package embeddednatsextension

import (
	"context"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nats-io/nats.go"
	"github.com/otelcol-svc/otelcol-svc/extension/embeddednatsextension/internal/metadata"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	tests := []struct {
		id       component.ID
		expected component.Config
		errs     []string
	}{
		{id: component.NewID(metadata.Type), expected: createDefaultConfig()},
		{id: component.NewIDWithName(metadata.Type, "custom"), expected: &Config{Listen: "0.0.0.0:14222", StoreDir: "/var/lib/otelcol-svc/nats", MaxStore: 10 << 30, InProcessClients: true}},
		// Nothing else matters with an external NATS.
		{id: component.NewIDWithName(metadata.Type, "external"), expected: &Config{ExternalURL: "nats://nats.internal:4222", Listen: "127.0.0.1:4223", StoreDir: "./data/nats"}},
		{id: component.NewIDWithName(metadata.Type, "badlisten"), errs: []string{"host:port", "store_dir is required"}},
	}
	for _, tt := range tests {
		t.Run(tt.id.String(), func(t *testing.T) {
			cfg := NewFactory().CreateDefaultConfig()
			sub, err := cm.Sub(tt.id.String())
			require.NoError(t, err)
			require.NoError(t, sub.Unmarshal(cfg))
			err = confmap.Validate(cfg)
			if tt.errs == nil {
				require.NoError(t, err)
				assert.Equal(t, tt.expected, cfg)
				return
			}
			for _, want := range tt.errs {
				assert.ErrorContains(t, err, want)
			}
		})
	}
}

func TestStartsJetStreamAndStopsWhenExternal(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Listen = "127.0.0.1:" + itoa(testenv.FreePort(t))
	cfg.StoreDir = t.TempDir()
	ext, err := NewFactory().Create(context.Background(), extensiontest.NewNopSettings(metadata.Type), cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	nc, err := nats.Connect(ext.(*embeddedNATS).ClientURL())
	require.NoError(t, err)
	js, err := nc.JetStream()
	require.NoError(t, err)
	_, err = js.AccountInfo()
	assert.NoError(t, err, "JetStream must be enabled")
	nc.Close()
	require.NoError(t, ext.Shutdown(context.Background()))

	// NATS_URL turns the embedded server off: the log says so at INFO, with the URL used
	// (credentials and tokens redacted), and nothing listens on the listen address.
	cfg.ExternalURL = "nats://user:secret@elsewhere:4222,nats://s3cr3t-token@other:4222"
	set := extensiontest.NewNopSettings(metadata.Type)
	core, logs := observer.New(zapcore.InfoLevel)
	set.Logger = zap.New(core)
	ext, err = NewFactory().Create(context.Background(), set, cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	assert.Empty(t, ext.(*embeddedNATS).ClientURL(), "components must dial the external URL instead")
	entries := logs.FilterMessageSnippet("embedded NATS is not started").All()
	require.Len(t, entries, 1, "the start must say the embedded NATS is off")
	assert.Equal(t, zapcore.InfoLevel, entries[0].Level)
	assert.Contains(t, entries[0].Message, "nats://redacted@elsewhere:4222,nats://redacted@other:4222")
	assert.Equal(t, "nats://redacted@elsewhere:4222,nats://redacted@other:4222", entries[0].ContextMap()["nats_url"])
	for _, e := range logs.All() {
		assert.NotContains(t, e.Message, "secret")
		assert.NotContains(t, e.Message, "s3cr3t")
	}
	_, err = net.DialTimeout("tcp", cfg.Listen, time.Second)
	assert.Error(t, err, "nothing may listen on the embedded address with NATS_URL set")
	require.NoError(t, ext.Shutdown(context.Background()))
}

func itoa(i int) string { return strconv.Itoa(i) }

// With in_process_clients on, the collector's own components get an in-memory connection;
// with an external NATS there is no server to connect to in memory.
func TestInProcessClients(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	assert.False(t, cfg.InProcessClients, "off by default")
	cfg.InProcessClients = true
	cfg.Listen = "127.0.0.1:" + itoa(testenv.FreePort(t))
	cfg.StoreDir = t.TempDir()
	ext, err := NewFactory().Create(context.Background(), extensiontest.NewNopSettings(metadata.Type), cfg)
	require.NoError(t, err)
	e := ext.(*embeddedNATS)
	_, err = e.InProcessServer().InProcessConn()
	require.ErrorIs(t, err, errNotRunning, "nothing to connect to before Start")
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	nc, err := nats.Connect(e.ClientURL(), nats.InProcessServer(e.InProcessServer()))
	require.NoError(t, err)
	assert.Equal(t, "pipe", nc.ConnectedAddr())
	require.NoError(t, nc.Flush())
	nc.Close()
	require.NoError(t, ext.Shutdown(context.Background()))

	cfg.InProcessClients = false
	assert.Nil(t, e.InProcessServer(), "off: components dial the listen address")
	cfg.InProcessClients = true
	cfg.ExternalURL = "nats://elsewhere:4222"
	assert.Nil(t, e.InProcessServer())
}
