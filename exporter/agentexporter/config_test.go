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

	"github.com/otelcol-svc/otelcol-svc/exporter/agentexporter/internal/metadata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/internal/delivery"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

func TestDefaultConfig(t *testing.T) {
	def := NewFactory().CreateDefaultConfig().(*Config)
	assert.Equal(t, 10*time.Second, def.Timeout)
	assert.Equal(t, delivery.RetryConfig{InitialInterval: 500 * time.Millisecond, MaxInterval: 30 * time.Second, MaxElapsedTime: 2 * time.Minute}, def.Retry)
	assert.Equal(t, int64(64<<10), def.MaxResponseBytes)
	assert.Equal(t, 12<<20, def.MaxCallBytes)
	assert.Equal(t, delivery.DeliveryLogConfig{Enabled: true, MaxPerProject: deliverylog.DefaultMaxPerProject, MaxBytesPerProject: deliverylog.DefaultMaxBytesPerProject,
		Stream: delivery.DeliveryStreamConfig{MaxBytes: 8 << 30}, Replay: delivery.ReplayConfig{Enabled: true}}, def.DeliveryLog)
	assert.Equal(t, delivery.TargetConfig{Circuit: delivery.CircuitConfig{Failures: 10, MinDuration: 30 * time.Second, ProbeInterval: 30 * time.Second}}, def.Target,
		"no rate cap; a circuit only for a target failing ten times over 30s")
	assert.Equal(t, delivery.FailureNoticesConfig{Enabled: true, Interval: 10 * time.Minute}, def.FailureNotices)
	assert.Empty(t, def.DashboardURL, "no link unless the dashboard's address is known")
	assert.Equal(t, 1, def.LogReplicas())
	def.DeadLetterStream.Replicas = 3
	assert.Equal(t, 3, def.LogReplicas(), "the log follows the dead-letter stream's replicas")
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
			NATS:   natsclient.Config{URL: "nats://n1:4222,nats://n2:4222", Extension: natsclient.DefaultExtension, ConnectTimeout: 2 * time.Second},
			Mirror: mirrorcache.DefaultExtension,
			Settings: delivery.Settings{
				DeadLetterStream: streams.Limits{MaxAge: 336 * time.Hour, MaxBytes: 256 << 20, Replicas: 3, DuplicateWindow: 2 * time.Minute},
				Timeout:          5 * time.Second,
				Retry:            delivery.RetryConfig{InitialInterval: time.Second, MaxInterval: time.Minute, MaxElapsedTime: 10 * time.Minute},
				AllowCIDRs:       "127.0.0.0/8, 10.0.0.7",
				MaxResponseBytes: 4096,
				DeliveryLog: delivery.DeliveryLogConfig{
					MaxPerProject: 500, MaxBytesPerProject: 16 << 20,
					Stream: delivery.DeliveryStreamConfig{MaxBytes: 1 << 30, Replicas: 3},
				},
				// failures: 0 turns the circuit off; the other circuit settings keep their defaults.
				Target:         delivery.TargetConfig{MaxRate: 2.5, Circuit: delivery.CircuitConfig{MinDuration: 30 * time.Second, ProbeInterval: 30 * time.Second}},
				DashboardURL:   "https://cp.example.com",
				FailureNotices: delivery.FailureNoticesConfig{Enabled: true, Interval: 30 * time.Minute},
			},
			MaxCallBytes: 2 << 20,
		}},
		{id: component.NewIDWithName(metadata.Type, "bad"), errs: []string{
			"nats: nats url",
			"dead_letter_stream: replicas must be between 1 and 5",
			"timeout must be positive",
			"retry: max_interval must not be less than initial_interval",
			"max_elapsed_time must be positive",
			`allow_cidrs: SVC_OUTBOUND_ALLOW entry "localhost"`,
			"max_response_bytes must be at least 1",
			"max_call_bytes must be at least 1048576",
			"delivery_log: max_per_project must be at least 1",
			"max_bytes_per_project must be at least 1048576",
			"stream: max_bytes must be at least 1048576",
			"stream: replicas must be between 0 (as dead_letter_stream) and 5, got 7",
			"target: max_rate must be 0 (no cap) or a positive number",
			"circuit: min_duration must not be negative",
			"circuit: probe_interval must be positive",
			`dashboard_url: "cp.example.com" is not an http(s) address`,
			"failure_notices: interval must be at least 1s",
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
