package pipelinecfg_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinecfg"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

func TestGuardrailDefaultsChangeNothing(t *testing.T) {
	c, err := pipelinecfg.Compile(mirror.Pipeline{WindowEnabled: true, GroupKey: "traceId"})
	require.NoError(t, err)
	assert.Zero(t, c.Cooldown, "no cooldown unless asked for")
	assert.Nil(t, c.DedupKey, "the group key is the dedup key")
	assert.Zero(t, c.MaxCallsPerMinute)
	assert.Zero(t, c.MaxCallsPerDay)
	assert.Equal(t, mirror.DefaultWindowMaxBytes, c.WindowMaxBytes)
	assert.Equal(t, mirror.DefaultWindowMaxEvents, c.WindowMaxEvents)

	c, err = pipelinecfg.Compile(mirror.Pipeline{CooldownSeconds: 60, DedupKey: `resource_attributes["k8s.pod.name"]`,
		MaxCallsPerMinute: 5, MaxCallsPerDay: 100, WindowMaxBytes: 100_000, WindowMaxEvents: 200})
	require.NoError(t, err)
	assert.Equal(t, time.Minute, c.Cooldown)
	assert.NotNil(t, c.DedupKey)
	assert.Equal(t, 5, c.MaxCallsPerMinute)
	assert.Equal(t, 100, c.MaxCallsPerDay)
	assert.Equal(t, 100_000, c.WindowMaxBytes)
	assert.Equal(t, 200, c.WindowMaxEvents)
}

func TestGuardrailRefusals(t *testing.T) {
	for _, tt := range []struct {
		p     mirror.Pipeline
		field string
		msg   string
	}{
		{mirror.Pipeline{CooldownSeconds: -1}, "cooldown_seconds", "must be between 0 and 86400 (0 turns the cooldown off), got -1"},
		{mirror.Pipeline{CooldownSeconds: 86401}, "cooldown_seconds", "must be between 0 and 86400 (0 turns the cooldown off), got 86401"},
		{mirror.Pipeline{MaxCallsPerMinute: -5}, "max_calls_per_minute", "must be between 0 and 10000 (0 is no limit), got -5"},
		{mirror.Pipeline{MaxCallsPerDay: 2_000_000}, "max_calls_per_day", "must be between 0 and 1000000 (0 is no limit), got 2000000"},
		{mirror.Pipeline{WindowMaxBytes: 100}, "window_max_bytes", "must be between 8192 and 10000000 (0 is the default, 400000), got 100"},
		{mirror.Pipeline{WindowMaxBytes: -1}, "window_max_bytes", "must be between 8192 and 10000000 (0 is the default, 400000), got -1"},
		{mirror.Pipeline{WindowMaxEvents: 50_001}, "window_max_events", "must be between 0 and 50000 (0 is the default, 5000), got 50001"},
		{mirror.Pipeline{CooldownSeconds: 60, DedupKey: `resource_attributes["k8s.pod.name"`}, "dedup_key", `value "resource_attributes[\"k8s.pod.name\""`},
		{mirror.Pipeline{DedupKey: `nosuchfunc(body)`}, "dedup_key", "nosuchfunc"},
	} {
		_, err := pipelinecfg.Compile(tt.p)
		fe, ok := pipelinecfg.IsFieldError(err)
		require.True(t, ok, "%+v: %v", tt.p, err)
		assert.Equal(t, tt.field, fe.Field)
		assert.Contains(t, fe.Err.Error(), tt.msg)
	}
}
