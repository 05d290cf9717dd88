package jetstreamreceiver

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/otelcol-svc/otelcol-svc/receiver/jetstreamreceiver/internal/metadata"
)

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	defaults := func(change func(*Config)) *Config {
		cfg := createDefaultConfig().(*Config)
		change(cfg)
		return cfg
	}
	tests := []struct {
		id       component.ID
		expected *Config
		errs     []string
	}{
		{id: component.NewID(metadata.Type), expected: defaults(func(c *Config) {
			assert.Equal(t, ConsumeRaw, c.Consume, "raw is the default")
			assert.Equal(t, 4, c.MaxInflightBatches, "a few batches past a retried one")
			assert.Equal(t, time.Second, c.DrainTimeout, "a hung batch is with another process within 2 s of SIGTERM")
		})},
		{id: component.NewIDWithName(metadata.Type, "tuned"), expected: defaults(func(c *Config) {
			c.NATS.URL = "nats://n1:4222"
			c.Durable = "svc-pipeline-blue"
			c.BatchSize = 1000
			c.MaxInflightBatches = 8
			c.Linger = 200 * time.Millisecond
			c.AckWait = 2 * time.Minute
			c.RetryDelay = 10 * time.Second
			c.DrainTimeout = time.Second
		})},
		{id: component.NewIDWithName(metadata.Type, "output"), expected: defaults(func(c *Config) {
			c.Consume = ConsumeOutput
			c.Durable = "svc-sink"
			c.BatchSize = 100
			c.Linger = 0
		})},
		{id: component.NewIDWithName(metadata.Type, "badconsume"), errs: []string{`consume must be "raw" or "output", got "outputs"`}},
		{id: component.NewIDWithName(metadata.Type, "bad"), errs: []string{"durable must name", "batch_size must be between", "max_inflight_batches must be between 1 and 64, got 0", "ack_wait must be at least 1s", "drain_timeout must not be negative"}},
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
