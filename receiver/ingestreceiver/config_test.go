package ingestreceiver

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"

	"github.com/otelcol-svc/otelcol-svc/receiver/ingestreceiver/internal/console"
	"github.com/otelcol-svc/otelcol-svc/receiver/ingestreceiver/internal/metadata"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

func TestDefaultConfig(t *testing.T) {
	def := NewFactory().CreateDefaultConfig().(*Config)
	assert.Equal(t, "0.0.0.0:4318", def.NetAddr.Endpoint)
	assert.Equal(t, int64(10<<20), def.MaxRequestBodySize)
	assert.Equal(t, 10000, def.MaxObjectsPerRequest)
	assert.Equal(t, 10000, def.MaxRecordsPerRequest)
	assert.Equal(t, int64(128<<20), def.MaxInflightBytes)
	assert.Zero(t, def.MaxInflightBytesPerAccount)
	assert.Equal(t, int64(32<<20), perAccount(def), "an account holds at most a quarter")
	assert.Equal(t, int64(64<<10), def.MinBodyRate)
	assert.Equal(t, 10*time.Second, def.BodyHoldWindow)
	assert.Equal(t, 10*time.Second, def.ReadHeaderTimeout, "a client trickling headers is cut off")
	require.True(t, def.Keepalive.HasValue())
	assert.Equal(t, time.Minute, def.Keepalive.Get().IdleTimeout)
	assert.Equal(t, DeliveryLogConfig{PipelineDurable: "svc-pipeline", SinkDurable: "svc-sink", ReplayReplicas: 1}, def.DeliveryLog,
		"the durable names the shipped configs give the pipeline and sink roles")
	assert.Equal(t, []string{"http://localhost:8080", "http://127.0.0.1:8080", "http://[::1]:8080"}, def.Console.AllowedOrigins,
		"the dashboard of `make run`, under each loopback name")
}

// The dashboard of `make run` opened at http://127.0.0.1:8080 or http://[::1]:8080, not
// only http://localhost:8080, reads the console: Recent events and Fields broke there, as
// a browser sends the Origin as typed. Checked on the factory default and on the value
// the shipped configs give when SVC_DASHBOARD_ORIGIN is unset, by a console read as the
// browser sends it; another origin still gets no CORS answer.
func TestDefaultConsoleOriginsAllowTheDashboardOnLoopback(t *testing.T) {
	t.Setenv("SVC_DASHBOARD_ORIGIN", "")                    // restored after the test...
	require.NoError(t, os.Unsetenv("SVC_DASHBOARD_ORIGIN")) // ...unset during it, as on a fresh machine
	shipped := func(file string) []string {
		r, err := confmap.NewResolver(confmap.ResolverSettings{
			URIs:              []string{"file:" + filepath.Join("..", "..", "configs", file)},
			ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory(), envprovider.NewFactory()},
		})
		require.NoError(t, err)
		conf, err := r.Resolve(context.Background())
		require.NoError(t, err)
		sub, err := conf.Sub("receivers::ingest::console")
		require.NoError(t, err)
		var c ConsoleConfig
		require.NoError(t, sub.Unmarshal(&c))
		return c.AllowedOrigins
	}
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	for name, allowed := range map[string][]string{
		"factory default":       NewFactory().CreateDefaultConfig().(*Config).Console.AllowedOrigins,
		"configs/embedded.yaml": shipped("embedded.yaml"),
		"configs/receiver.yaml": shipped("receiver.yaml"),
	} {
		t.Run(name, func(t *testing.T) {
			tr := startTestReceiver(t, func(c *Config) { c.Console.AllowedOrigins = allowed }, &fakeAuth{js: js})
			events := tr.url + "/console/v1/projects/p1/events"
			for _, origin := range []string{"http://localhost:8080", "http://127.0.0.1:8080", "http://[::1]:8080"} {
				a := do(t, http.MethodGet, events, nil, map[string]string{"Origin": origin, "X-API-Key": "key-p1"})
				require.Equal(t, http.StatusOK, a.status, "%s", a.body)
				assert.Equal(t, origin, a.header.Get("Access-Control-Allow-Origin"), "a read from the dashboard at %s", origin)
			}
			for _, other := range []string{"http://evil.example", "http://127.0.0.1:8081", "http://localhost.evil.example:8080"} {
				a := do(t, http.MethodGet, events, nil, map[string]string{"Origin": other, "X-API-Key": "key-p1"})
				assert.Empty(t, a.header.Get("Access-Control-Allow-Origin"), "a read from %s", other)
			}
		})
	}
}

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	tests := []struct {
		id    component.ID
		check func(t *testing.T, cfg *Config)
		errs  []string
	}{
		{id: component.NewID(metadata.Type), check: func(t *testing.T, cfg *Config) {
			assert.Equal(t, "projectauth", cfg.Auth.Get().Config.AuthenticatorID.String())
			// With the jetstream receivers' 1 s each, the all-in-one stop stays under 10 s.
			assert.Equal(t, 2*time.Second, cfg.DrainDelay)
			assert.Equal(t, 3*time.Second, cfg.DrainTimeout)
		}},
		{id: component.NewIDWithName(metadata.Type, "tls"), check: func(t *testing.T, cfg *Config) {
			assert.Equal(t, int64(1<<20), cfg.MaxRequestBodySize)
			assert.Equal(t, 2*time.Second, cfg.RetryAfter)
			assert.Equal(t, 500, cfg.MaxObjectsPerRequest)
			assert.Equal(t, 2000, cfg.MaxRecordsPerRequest)
			assert.Equal(t, int64(64<<20), cfg.MaxInflightBytes)
			assert.Equal(t, int64(8<<20), perAccount(cfg))
			assert.Equal(t, int64(1024), cfg.MinBodyRate)
			// Read by the receiver's own Unmarshal, beside the server's keys.
			assert.Equal(t, 500*time.Millisecond, cfg.DrainDelay)
			assert.Equal(t, 3*time.Second, cfg.DrainTimeout)
			assert.True(t, cfg.TLS.HasValue())
			assert.Equal(t, DeliveryLogConfig{PipelineDurable: "pipe", SinkDurable: "out", ReplayReplicas: 3}, cfg.DeliveryLog)
			// One environment variable may name several origins.
			origins, err := console.ParseOrigins(cfg.Console.AllowedOrigins)
			require.NoError(t, err)
			assert.Equal(t, []string{"https://dash.example.com", "http://localhost:8080"}, origins)
		}},
		{id: component.NewIDWithName(metadata.Type, "noauth"), errs: []string{"auth.authenticator is required"}},
		{id: component.NewIDWithName(metadata.Type, "noobjects"), errs: []string{
			"max_objects_per_request must be positive",
			"max_records_per_request must be positive",
			"max_inflight_bytes must be at least 1 MiB",
			"max_inflight_bytes_per_account must be 0",
			"min_body_rate must be 0",
			"drain_delay must be 0",
			"drain_timeout must be 0",
			"delivery_log.pipeline_durable and delivery_log.sink_durable must name",
			`console.allowed_origins: "https://dash.example.com/app" is not an origin`,
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
				tt.check(t, cfg.(*Config))
				return
			}
			for _, want := range tt.errs {
				assert.ErrorContains(t, err, want)
			}
		})
	}
}
