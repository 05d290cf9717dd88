package agentexporter

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/otelcol-svc/otelcol-svc/components/mirror/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/components/natsclient"
	"github.com/otelcol-svc/otelcol-svc/components/streams"
	"github.com/otelcol-svc/otelcol-svc/exporter/agentexporter/internal/metadata"
)

func TestDefaultConfig(t *testing.T) {
	def := NewFactory().CreateDefaultConfig().(*Config)
	assert.Equal(t, 10*time.Second, def.Timeout)
	assert.Equal(t, RetryConfig{InitialInterval: 500 * time.Millisecond, MaxInterval: 30 * time.Second, MaxElapsedTime: 2 * time.Minute}, def.Retry)
	assert.Equal(t, int64(64<<10), def.MaxResponseBytes)
}

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	tests := []struct {
		id       component.ID
		expected component.Config
		errs     []string
	}{
		{id: component.NewID(metadata.Type), expected: defaultConfig()},
		{id: component.NewIDWithName(metadata.Type, "custom"), expected: &Config{
			NATS:             natsclient.Config{URL: "nats://n1:4222,nats://n2:4222", Extension: natsclient.DefaultExtension, ConnectTimeout: 2 * time.Second},
			Mirror:           mirrorcache.DefaultExtension,
			DeadLetterStream: streams.Limits{MaxAge: 336 * time.Hour, MaxBytes: 256 << 20, Replicas: 3, DuplicateWindow: 2 * time.Minute},
			Timeout:          5 * time.Second,
			Retry:            RetryConfig{InitialInterval: time.Second, MaxInterval: time.Minute, MaxElapsedTime: 10 * time.Minute},
			AllowCIDRs:       "127.0.0.0/8, 10.0.0.7",
			MaxResponseBytes: 4096,
		}},
		{id: component.NewIDWithName(metadata.Type, "bad"), errs: []string{
			"nats: nats url",
			"dead_letter_stream: replicas must be between 1 and 5",
			"timeout must be positive",
			"retry: max_interval must not be less than initial_interval",
			"max_elapsed_time must be positive",
			`allow_cidrs: SVC_OUTBOUND_ALLOW entry "localhost"`,
			"max_response_bytes must be at least 1",
		}},
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
