package pipelinecfg_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinecfg"
	"github.com/otelcol-svc/otelcol-svc/internal/incident"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/validation"
)

func TestModes(t *testing.T) {
	for _, tt := range []struct {
		p      mirror.Pipeline
		mode   string
		window bool
	}{
		{mirror.Pipeline{}, mirror.ModeLegacy, false},
		{mirror.Pipeline{WindowEnabled: true}, mirror.ModeWindow, true},
		{mirror.Pipeline{Mode: "legacy"}, mirror.ModeLegacy, false},
		{mirror.Pipeline{Mode: "window"}, mirror.ModeWindow, true},
		{mirror.Pipeline{Mode: "incident"}, mirror.ModeIncident, false},
		{mirror.Pipeline{Mode: "incident", WindowEnabled: true}, mirror.ModeIncident, false},
	} {
		c, err := pipelinecfg.Compile(tt.p)
		require.NoError(t, err, "%+v", tt.p)
		assert.Equal(t, tt.mode, c.Mode)
		assert.Equal(t, tt.window, c.Window, "window processing only in window mode: %+v", tt.p)
	}
}

func TestIncidentDefaults(t *testing.T) {
	c, err := pipelinecfg.Compile(mirror.Pipeline{Mode: "incident", CooldownSeconds: 600})
	require.NoError(t, err)
	assert.Equal(t, incident.Settings{GroupWait: 30 * time.Second, GroupInterval: 5 * time.Minute, ResolveAfter: 30 * time.Minute}, c.Incident)
	assert.Nil(t, c.Fingerprint, "one incident per project")
	assert.Nil(t, c.ResolveWhen)
	assert.Zero(t, c.Cooldown, "group_interval paces incident calls, not a cooldown")

	c, err = pipelinecfg.Compile(mirror.Pipeline{Mode: "incident", Fingerprint: `resource_attributes["service.name"]`,
		ResolveWhen: `severity_number < 9`, Trigger: `severity_number >= 17`,
		GroupWait: "0s", GroupInterval: "1s", ResolveAfter: "168h", ReopenWithin: "1h30m"})
	require.NoError(t, err)
	assert.Equal(t, incident.Settings{GroupInterval: time.Second, ResolveAfter: 7 * 24 * time.Hour, ReopenWithin: 90 * time.Minute}, c.Incident)
	require.NotNil(t, c.Fingerprint)
	require.NotNil(t, c.ResolveWhen)
	assert.Equal(t, map[string]bool{"resourceAttributes": true, "resource_attributes": true, "severityNumber": true, "severity_number": true},
		c.IncidentFields, "records are decoded in part for what the four expressions read")

	c, err = pipelinecfg.Compile(mirror.Pipeline{Mode: "incident", Fingerprint: `event["svc"]`, Transforms: []string{`set(event["svc"], "x")`}})
	require.NoError(t, err)
	assert.Nil(t, c.IncidentFields, "after transforms the record is decoded whole")
	c, err = pipelinecfg.Compile(mirror.Pipeline{Mode: "incident", Fingerprint: `event`})
	require.NoError(t, err)
	assert.Nil(t, c.IncidentFields, "a fingerprint of the whole record needs it whole")
}

// The control plane refuses these at save with the answer's field and message.
func TestIncidentRefusals(t *testing.T) {
	for _, tt := range []struct {
		p     mirror.Pipeline
		field string
		msg   string
	}{
		{mirror.Pipeline{Mode: "incidents"}, "mode", `must be "legacy", "window" or "incident", got "incidents"`},
		{mirror.Pipeline{Mode: strings.Repeat("m", 5000)}, "mode", `must be "legacy", "window" or "incident", got "mmmm`},
		{mirror.Pipeline{Mode: "legacy", WindowEnabled: true}, "mode", `window_enabled is true`},
		{mirror.Pipeline{Mode: "incident", GroupWait: "soon"}, "group_wait", `soon`},
		{mirror.Pipeline{Mode: "incident", GroupWait: "2h"}, "group_wait", `2h`},
		{mirror.Pipeline{Mode: "incident", GroupWait: "-1s"}, "group_wait", `-1s`},
		{mirror.Pipeline{Mode: "incident", GroupInterval: "0s"}, "group_interval", `0s`},
		{mirror.Pipeline{Mode: "incident", GroupInterval: "25h"}, "group_interval", `25h`},
		{mirror.Pipeline{Mode: "incident", ResolveAfter: "500ms"}, "resolve_after", `500ms`},
		{mirror.Pipeline{Mode: "incident", ResolveAfter: "169h"}, "resolve_after", `169h`},
		{mirror.Pipeline{Mode: "incident", ReopenWithin: "169h"}, "reopen_within", `169h`},
		{mirror.Pipeline{Mode: "incident", Fingerprint: `resource_attributes["service.name"`}, "fingerprint", `resource_attributes`},
		{mirror.Pipeline{Mode: "incident", ResolveWhen: `status ==`}, "resolve_when", `status ==`},
		{mirror.Pipeline{Mode: "incident", Fingerprint: `"` + strings.Repeat("x", validation.MaxExpressionBytes) + `"`}, "fingerprint", "an expression has at most 4096"},
		{mirror.Pipeline{Mode: "incident", ResolveWhen: `body == "` + strings.Repeat("x", validation.MaxExpressionBytes) + `"`}, "resolve_when", "an expression has at most 4096"},
	} {
		_, err := pipelinecfg.Compile(tt.p)
		fe, ok := pipelinecfg.IsFieldError(err)
		require.True(t, ok, "%+v: %v", tt.p, err)
		assert.Equal(t, tt.field, fe.Field, "%v", err)
		assert.Contains(t, fe.Err.Error(), tt.msg)
		assert.NotContains(t, fe.Err.Error(), tt.field+": "+tt.field, "the field is named once")
	}
	// In any mode, as group_key is: the mistake is said when saved.
	_, err := pipelinecfg.Compile(mirror.Pipeline{GroupWait: "soon"})
	fe, ok := pipelinecfg.IsFieldError(err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, "group_wait", fe.Field)
	_, err = pipelinecfg.Compile(mirror.Pipeline{WindowEnabled: true, Fingerprint: `nosuchfunc(body)`})
	fe, ok = pipelinecfg.IsFieldError(err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, "fingerprint", fe.Field)
	c, err := pipelinecfg.Compile(mirror.Pipeline{CooldownSeconds: 60, Fingerprint: `body`})
	require.NoError(t, err)
	assert.Equal(t, time.Minute, c.Cooldown, "a legacy pipeline keeps its cooldown")
	assert.Nil(t, c.IncidentFields)

	// The bounds themselves are allowed.
	for _, p := range []mirror.Pipeline{
		{Mode: "incident", GroupWait: "0s", GroupInterval: "24h", ResolveAfter: "1s", ReopenWithin: "0s"},
		{Mode: "incident", GroupWait: "1h", GroupInterval: "1s", ResolveAfter: "168h", ReopenWithin: "168h"},
	} {
		_, err := pipelinecfg.Compile(p)
		assert.NoError(t, err, "%+v", p)
	}
}

// A pipeline's fields are outside input (the API's body, a mirror entry): whatever they
// hold, Compile answers a compiled pipeline or an error naming one of its fields.
func FuzzCompileIncident(f *testing.F) {
	f.Add("incident", `resource_attributes["service.name"]`, `body == "ok"`, "30s", "5m", "30m", "")
	f.Add("incident", ``, ``, "0s", "1s", "168h", "1h")
	f.Add("incidents", `event`, `status ==`, "-1s", "soon", "7d", "1e9h")
	f.Add("", ``, ``, "", "", "", "")
	fields := map[string]bool{"mode": true, "fingerprint": true, "resolve_when": true, "group_wait": true,
		"group_interval": true, "resolve_after": true, "reopen_within": true}
	f.Fuzz(func(t *testing.T, mode, fp, resolve, gw, gi, ra, rw string) {
		c, err := pipelinecfg.Compile(mirror.Pipeline{Mode: mode, Fingerprint: fp, ResolveWhen: resolve,
			GroupWait: gw, GroupInterval: gi, ResolveAfter: ra, ReopenWithin: rw})
		if err != nil {
			fe, ok := pipelinecfg.IsFieldError(err)
			if !ok || !fields[fe.Field] {
				t.Fatalf("%v names no field of the pipeline", err)
			}
			return
		}
		if c.Mode == mirror.ModeIncident {
			s := c.Incident
			if s.GroupWait < 0 || s.GroupWait > time.Hour || s.GroupInterval < time.Second || s.GroupInterval > 24*time.Hour ||
				s.ResolveAfter < time.Second || s.ResolveAfter > 7*24*time.Hour || s.ReopenWithin < 0 || s.ReopenWithin > 7*24*time.Hour {
				t.Fatalf("settings out of bounds accepted: %+v", s)
			}
		}
	})
}
