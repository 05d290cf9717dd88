package jetstreamexporter

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/otelcol-svc/otelcol-svc/components/natsclient"
	"github.com/otelcol-svc/otelcol-svc/components/streams"
)

func load(t *testing.T, name string) *Config {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub(component.MustNewIDWithName("jetstream", name).String())
	require.NoError(t, err)
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg
}

func TestConfig(t *testing.T) {
	def := load(t, "")
	require.NoError(t, def.Validate())
	assert.Equal(t, streams.DefaultLimits(), def.Stream)
	assert.Equal(t, PublishAsync, def.Publish)
	assert.Equal(t, 1_000_000, def.MaxRecordBytes)

	assert.Equal(t, &Config{
		NATS:           natsclient.Config{URL: "nats://n1:4222,nats://n2:4222,nats://n3:4222", Extension: natsclient.DefaultExtension, ConnectTimeout: 2 * time.Second},
		Stream:         streams.Limits{MaxAge: 72 * time.Hour, MaxBytes: 512 << 20, Replicas: 3, DuplicateWindow: 5 * time.Minute},
		PublishTimeout: 2 * time.Second,
		MaxPending:     4096,
		Publish:        PublishFastBatch,
		MaxRecordBytes: 500000,
	}, load(t, "cluster"))

	err := load(t, "bad").Validate()
	require.Error(t, err)
	for _, want := range []string{"replicas must be between 1 and 5", "duplicate_window must not exceed max_age", "publish_timeout must be positive", `publish must be "async" or "fast_batch", got "sync"`, "max_record_bytes must be positive"} {
		assert.ErrorContains(t, err, want)
	}
}
