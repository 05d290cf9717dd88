package jetstreamreceiver

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap/confmaptest"
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
	require.NoError(t, load(t, "").Validate())
	tuned := load(t, "tuned")
	require.NoError(t, tuned.Validate())
	assert.Equal(t, "svc-pipeline-blue", tuned.Durable)
	assert.Equal(t, 1000, tuned.BatchSize)
	assert.Equal(t, 200*time.Millisecond, tuned.Linger)
	assert.Equal(t, 2*time.Minute, tuned.AckWait)

	out := load(t, "output")
	require.NoError(t, out.Validate())
	assert.Equal(t, ConsumeOutput, out.Consume)
	assert.Equal(t, ConsumeRaw, tuned.Consume, "raw is the default")
	assert.ErrorContains(t, load(t, "badconsume").Validate(), `consume must be "raw" or "output", got "outputs"`)

	err := load(t, "bad").Validate()
	for _, want := range []string{"durable must name", "batch_size must be between", "ack_wait must be at least 1s"} {
		assert.ErrorContains(t, err, want)
	}
}
