package windowprocessor

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap/confmaptest"
)

func TestConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	load := func(name string) *Config {
		sub, err := cm.Sub(component.MustNewIDWithName("window", name).String())
		require.NoError(t, err)
		cfg := createDefaultConfig().(*Config)
		require.NoError(t, sub.Unmarshal(cfg))
		return cfg
	}
	assert.NoError(t, load("").Validate())
	assert.NoError(t, load("redis").Validate())
	err = load("bad").Validate()
	assert.ErrorContains(t, err, "redis_url must look like")
	assert.ErrorContains(t, err, "sweep_interval must be positive")
}

func TestCallBodyKeepsRecordBytes(t *testing.T) {
	got := callBody([]byte(`{"n": 1.50}`), [][]byte{[]byte(`{"a":1}`), []byte(`{"b": 12345678901234567890}`)})
	assert.Equal(t, `{"trigger":{"n": 1.50},"window":[{"a":1},{"b": 12345678901234567890}]}`, string(got))
	assert.Equal(t, `{"trigger":{},"window":[]}`, string(callBody([]byte(`{}`), nil)))
}
