package incidentprocessor

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/otelcol-svc/otelcol-svc/processor/incidentprocessor/internal/metadata"
)

func TestDefaultConfig(t *testing.T) {
	def := NewFactory().CreateDefaultConfig().(*Config)
	assert.Empty(t, def.RedisURL, "events are kept in memory unless Redis is configured")
	assert.Equal(t, time.Second, def.Tick)
	assert.Equal(t, 30*time.Second, def.ClaimTimeout)
	assert.Equal(t, 16, def.MaxConcurrentCalls)
	assert.Equal(t, 1, def.Replicas)
	assert.Equal(t, "configmirror", def.Mirror.String())
	require.NoError(t, def.Validate())
}

func withDefaults(change func(*Config)) *Config {
	cfg := createDefaultConfig().(*Config)
	change(cfg)
	return cfg
}

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	tests := []struct {
		id       component.ID
		expected *Config
		errs     []string
	}{
		{id: component.NewID(metadata.Type), expected: withDefaults(func(*Config) {})},
		{id: component.NewIDWithName(metadata.Type, "redis"), expected: withDefaults(func(c *Config) {
			c.RedisURL = "redis://:secret@redis.internal:6379/2"
			c.NATS.URL = "nats://nats.internal:4222"
			c.Replicas = 3
			c.Tick = 2 * time.Second
			c.ClaimTimeout = time.Minute
		})},
		{id: component.NewIDWithName(metadata.Type, "bad"), errs: []string{"redis_url must look like", "tick must be between",
			"claim_timeout must be at least", "replicas must be between 1 and 5", "max_concurrent_calls must be positive",
			"max_record_bytes must be positive"}},
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
