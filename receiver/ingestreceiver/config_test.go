package ingestreceiver

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
	sub, err := cm.Sub(component.MustNewIDWithName("ingest", name).String())
	require.NoError(t, err)
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg
}

func TestConfig(t *testing.T) {
	def := load(t, "")
	require.NoError(t, def.Validate())
	assert.Equal(t, "0.0.0.0:4318", def.NetAddr.Endpoint)
	assert.Equal(t, int64(10<<20), def.MaxRequestBodySize)
	assert.Equal(t, 10000, def.MaxObjectsPerRequest)
	assert.Equal(t, 10000, def.MaxRecordsPerRequest)
	assert.Equal(t, int64(128<<20), def.MaxInflightBytes)
	assert.Equal(t, 10*time.Second, def.ReadHeaderTimeout, "a client trickling headers is cut off")
	require.True(t, def.Keepalive.HasValue())
	assert.Equal(t, time.Minute, def.Keepalive.Get().IdleTimeout)

	tls := load(t, "tls")
	require.NoError(t, tls.Validate())
	assert.Equal(t, int64(1<<20), tls.MaxRequestBodySize)
	assert.Equal(t, 2*time.Second, tls.RetryAfter)
	assert.Equal(t, 500, tls.MaxObjectsPerRequest)
	assert.Equal(t, 2000, tls.MaxRecordsPerRequest)
	assert.Equal(t, int64(64<<20), tls.MaxInflightBytes)
	assert.True(t, tls.TLS.HasValue())

	assert.ErrorContains(t, load(t, "noauth").Validate(), "auth.authenticator is required")
	assert.ErrorContains(t, load(t, "noobjects").Validate(), "max_objects_per_request must be positive")
	assert.ErrorContains(t, load(t, "noobjects").Validate(), "max_records_per_request must be positive")
	assert.ErrorContains(t, load(t, "noobjects").Validate(), "max_inflight_bytes must be at least 1 MiB")
}
