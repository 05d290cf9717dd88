package embeddednatsextension

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/extension/extensiontest"

	"github.com/nats-io/nats.go"
	"github.com/otelcol-svc/otelcol-svc/components/testenv"
)

func load(t *testing.T, name string) *Config {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub(component.MustNewIDWithName("embeddednats", name).String())
	require.NoError(t, err)
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg
}

func TestConfig(t *testing.T) {
	assert.NoError(t, load(t, "").Validate())
	assert.Equal(t, &Config{Listen: "0.0.0.0:14222", StoreDir: "/var/lib/otelcol-svc/nats", MaxStore: 10 << 30}, load(t, "custom"))
	assert.NoError(t, load(t, "external").Validate(), "nothing else matters with an external NATS")
	err := load(t, "badlisten").Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "host:port")
	assert.Contains(t, err.Error(), "store_dir is required")
}

func TestStartsJetStreamAndStopsWhenExternal(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Listen = "127.0.0.1:" + itoa(testenv.FreePort(t))
	cfg.StoreDir = t.TempDir()
	ext, err := NewFactory().Create(context.Background(), extensiontest.NewNopSettings(typeStr), cfg)
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

	cfg.ExternalURL = "nats://elsewhere:4222"
	ext, err = NewFactory().Create(context.Background(), extensiontest.NewNopSettings(typeStr), cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	assert.Empty(t, ext.(*embeddedNATS).ClientURL(), "components must dial the external URL instead")
	require.NoError(t, ext.Shutdown(context.Background()))
}

func itoa(i int) string { return strconv.Itoa(i) }
