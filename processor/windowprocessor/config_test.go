package windowprocessor

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/otelcol-svc/otelcol-svc/processor/windowprocessor/internal/metadata"
)

func TestDefaultConfig(t *testing.T) {
	def := NewFactory().CreateDefaultConfig().(*Config)
	assert.Empty(t, def.RedisURL, "windows are kept in memory unless Redis is configured")
	assert.Equal(t, 30*time.Second, def.SweepInterval)
	assert.Equal(t, 64<<20, def.MemoryMaxProjectBytes, "a project's in-memory windows are bounded by default")
	assert.Equal(t, 256<<20, def.MemoryMaxBytes, "and so are the process's, whatever the number of projects")
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
		{id: component.NewIDWithName(metadata.Type, "redis"), expected: withDefaults(func(c *Config) { c.RedisURL = "redis://:secret@redis.internal:6379/2" })},
		{id: component.NewIDWithName(metadata.Type, "bad"), errs: []string{"redis_url must look like", "sweep_interval must be positive", "memory_max_bytes must be positive"}},
		{id: component.NewIDWithName(metadata.Type, "bounded"), expected: withDefaults(func(c *Config) { c.MemoryMaxBytes = 134217728 })},
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
