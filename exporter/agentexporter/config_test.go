package agentexporter

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
	sub, err := cm.Sub(component.MustNewIDWithName("agent", name).String())
	require.NoError(t, err)
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg
}

func TestConfig(t *testing.T) {
	def := load(t, "")
	require.NoError(t, def.Validate())
	assert.Equal(t, defaultConfig(), def)
	assert.Equal(t, 10*time.Second, def.Timeout)
	assert.Equal(t, RetryConfig{InitialInterval: 500 * time.Millisecond, MaxInterval: 30 * time.Second, MaxElapsedTime: 2 * time.Minute}, def.Retry)
	assert.Equal(t, int64(64<<10), def.MaxResponseBytes)

	custom := load(t, "custom")
	require.NoError(t, custom.Validate())
	assert.Equal(t, &Config{
		NATS:             natsclient.Config{URL: "nats://n1:4222,nats://n2:4222", ConnectTimeout: 2 * time.Second},
		DeadLetterStream: streams.Limits{MaxAge: 336 * time.Hour, MaxBytes: 256 << 20, Replicas: 3, DuplicateWindow: 2 * time.Minute},
		Timeout:          5 * time.Second,
		Retry:            RetryConfig{InitialInterval: time.Second, MaxInterval: time.Minute, MaxElapsedTime: 10 * time.Minute},
		AllowCIDRs:       "127.0.0.0/8, 10.0.0.7",
		MaxResponseBytes: 4096,
	}, custom)

	err := load(t, "bad").Validate()
	require.Error(t, err)
	for _, want := range []string{
		"nats: nats url",
		"dead_letter_stream: replicas must be between 1 and 5",
		"timeout must be positive",
		"retry: max_interval must not be less than initial_interval",
		"max_elapsed_time must be positive",
		`allow_cidrs: SVC_OUTBOUND_ALLOW entry "localhost"`,
		"max_response_bytes must be at least 1",
	} {
		assert.ErrorContains(t, err, want)
	}
}
