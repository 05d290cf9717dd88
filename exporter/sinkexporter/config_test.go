package sinkexporter

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/otelcol-svc/otelcol-svc/exporter/sinkexporter/internal/metadata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/internal/delivery"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

func TestDefaultConfig(t *testing.T) {
	def := NewFactory().CreateDefaultConfig().(*Config)
	want := delivery.DefaultSettings()
	want.Retry.MaxElapsedTime = 10 * time.Minute
	assert.Equal(t, want, def.Settings, "the agent exporter's delivery settings, with a destination's 10-minute budget")
	assert.Equal(t, mirrorcache.DefaultExtension, def.Mirror)
	assert.Equal(t, "https://slack.com/api/", def.SlackAPIURL)
	assert.Equal(t, 1, def.incidentReplicas(), "as the dead letters when not set")
	require.NoError(t, def.Validate())
}

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	custom := defaultConfig()
	custom.NATS = natsclient.Config{URL: "nats://n1:4222,nats://n2:4222", Extension: natsclient.DefaultExtension, ConnectTimeout: 2 * time.Second}
	custom.DeadLetterStream = streams.Limits{MaxAge: 336 * time.Hour, MaxBytes: streams.DefaultLimits().MaxBytes, Replicas: 3, DuplicateWindow: streams.DefaultLimits().DuplicateWindow}
	custom.Timeout = 5 * time.Second
	custom.Retry = delivery.RetryConfig{InitialInterval: time.Second, MaxInterval: time.Minute, MaxElapsedTime: 20 * time.Minute}
	custom.AllowCIDRs = "127.0.0.0/8"
	custom.Target.MaxRate = 2.5
	custom.DashboardURL = "https://cp.example.com"
	custom.FailureNotices.Interval = 30 * time.Minute
	custom.SlackAPIURL = "http://127.0.0.1:8099/api/"
	custom.Incidents.Replicas = 3
	tests := []struct {
		id        component.ID
		expected  component.Config
		errs      []string
		unmarshal string
	}{
		{id: component.NewID(metadata.Type), expected: defaultConfig()},
		{id: component.NewIDWithName(metadata.Type, "custom"), expected: custom},
		{id: component.NewIDWithName(metadata.Type, "bad"), errs: []string{
			"nats: nats url",
			"timeout must be positive",
			"max_elapsed_time must be positive",
			`allow_cidrs: SVC_OUTBOUND_ALLOW entry "localhost"`,
			"delivery_log: max_per_project must be at least 1",
			"circuit: probe_interval must be positive",
			`dashboard_url: "cp.example.com" is not an http(s) address`,
			`slack_api_url: "https://slack.com/api" must end with "/"`,
			"incidents: replicas must be between 0 (as dead_letter_stream) and 5, got 7",
		}},
		{id: component.NewIDWithName(metadata.Type, "copied"), unmarshal: "max_call_bytes is a setting of the agent exporter"},
	}
	for _, tt := range tests {
		t.Run(tt.id.String(), func(t *testing.T) {
			cfg := NewFactory().CreateDefaultConfig()
			sub, err := cm.Sub(tt.id.String())
			require.NoError(t, err)
			err = sub.Unmarshal(cfg)
			if tt.unmarshal != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.unmarshal)
				return
			}
			require.NoError(t, err)
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
