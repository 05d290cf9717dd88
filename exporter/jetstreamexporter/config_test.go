package jetstreamexporter

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/otelcol-svc/otelcol-svc/exporter/jetstreamexporter/internal/metadata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

func TestDefaultConfig(t *testing.T) {
	def := NewFactory().CreateDefaultConfig().(*Config)
	assert.Equal(t, streams.DefaultLimits(), def.Stream)
	assert.Equal(t, PublishAsync, def.Publish)
	assert.Equal(t, 1_000_000, def.MaxRecordBytes)
	assert.Equal(t, UsageConfig{Enabled: true, FreeTierEvents: 10_000, Mirror: component.MustNewID("configmirror")}, def.Usage,
		"metering on, the specification's free tier, no rate limit")
}

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	tests := []struct {
		id       component.ID
		expected component.Config
		errs     []string
	}{
		{id: component.NewID(metadata.Type), expected: createDefaultConfig()},
		{id: component.NewIDWithName(metadata.Type, "cluster"), expected: &Config{
			NATS:           natsclient.Config{URL: "nats://n1:4222,nats://n2:4222,nats://n3:4222", Extension: natsclient.DefaultExtension, ConnectTimeout: 2 * time.Second},
			Stream:         streams.Limits{MaxAge: 72 * time.Hour, MaxBytes: 512 << 20, Replicas: 3, DuplicateWindow: 5 * time.Minute},
			PublishTimeout: 2 * time.Second,
			MaxPending:     4096,
			Publish:        PublishFastBatch,
			MaxRecordBytes: 500000,
			Usage: UsageConfig{
				Enabled: true, FreeTierEvents: 50000,
				RateLimit: RateLimitConfig{PerSecond: 200, Burst: 1000},
				Mirror:    component.MustNewIDWithName("configmirror", "tenants"),
			},
			Results: defaultResultsConfig(),
		}},
		// Off, the block is not checked: nothing reads it.
		{id: component.NewIDWithName(metadata.Type, "off"), expected: func() component.Config {
			c := createDefaultConfig().(*Config)
			c.Usage.Enabled, c.Usage.FreeTierEvents = false, -1
			return c
		}()},
		{id: component.NewIDWithName(metadata.Type, "bad"), errs: []string{
			"replicas must be between 1 and 5",
			"duplicate_window must not exceed max_age",
			"publish_timeout must be positive",
			`publish must be "async", "fast_batch" or "atomic_batch", got "sync"`,
			"max_record_bytes must be positive",
			"usage: free_tier_events must be 0 (unlimited) or more, got -1",
			"rate_limit.per_second must be 0 (off) or more, got -5",
			"rate_limit.burst must be 0 (per_second rounded up) or more, got -1",
			"results: max_bytes must be 0 (no limit) or more",
			"unmatched_per_hour must be 0 (no limit) or more",
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
