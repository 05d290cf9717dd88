package incident

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

var t0 = time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)

func TestDue(t *testing.T) {
	set := Settings{GroupWait: 30 * time.Second, GroupInterval: 5 * time.Minute, ResolveAfter: 30 * time.Minute}
	const claimTimeout = time.Minute
	// base: opened at t0, opening call made at t0+30s, one new event since.
	base := func() Incident {
		return Incident{Status: StatusOpen, OpenedAt: t0, LastEventAt: t0.Add(time.Minute), OpeningDone: true,
			LastCallAt: t0.Add(30 * time.Second), NewEvents: 1}
	}
	with := func(f func(*Incident)) Incident { i := base(); f(&i); return i }
	cases := []struct {
		name        string
		inc         Incident
		now         time.Time
		reason      string
		ok, resolve bool
	}{
		{"within group_wait nothing", with(func(i *Incident) { i.OpeningDone, i.LastCallAt = false, time.Time{} }),
			t0.Add(29 * time.Second), "", false, false},
		{"group_wait passed: opened", with(func(i *Incident) { i.OpeningDone, i.LastCallAt = false, time.Time{} }),
			t0.Add(30 * time.Second), ReasonOpened, true, false},
		{"within group_interval nothing", base(), t0.Add(30*time.Second + 5*time.Minute - time.Second), "", false, false},
		{"group_interval passed: updated", base(), t0.Add(30*time.Second + 5*time.Minute), ReasonUpdated, true, false},
		{"no new events no update", with(func(i *Incident) { i.NewEvents = 0 }), t0.Add(20 * time.Minute), "", false, false},
		{"muted no update", with(func(i *Incident) { i.MutedUntil = t0.Add(time.Hour) }), t0.Add(10 * time.Minute), "", false, false},
		{"mute over: updated", with(func(i *Incident) { i.MutedUntil = t0.Add(9 * time.Minute) }), t0.Add(10 * time.Minute), ReasonUpdated, true, false},
		{"acknowledged still updated", with(func(i *Incident) { i.Status = StatusAcknowledged }), t0.Add(10 * time.Minute), ReasonUpdated, true, false},
		{"reinvestigate", with(func(i *Incident) { i.ReinvestigateRequested, i.NewEvents = true, 0 }), t0.Add(time.Minute), ReasonReinvestigate, true, false},
		{"reinvestigate waits for the opening call", with(func(i *Incident) { i.ReinvestigateRequested, i.OpeningDone = true, false }),
			t0.Add(10 * time.Second), "", false, false},
		{"resolved: resolved call", with(func(i *Incident) { i.Status, i.ResolvedAt = StatusResolved, t0.Add(2*time.Minute) }),
			t0.Add(2 * time.Minute), ReasonResolved, true, false},
		{"resolved and told: nothing, no update", with(func(i *Incident) { i.Status, i.ResolvedCallDone = StatusResolved, true }),
			t0.Add(time.Hour), "", false, false},
		{"resolved before the opening call: opened first", with(func(i *Incident) { i.Status, i.OpeningDone = StatusResolved, false }),
			t0.Add(time.Hour), ReasonOpened, true, false},
		{"idle: resolve now", with(func(i *Incident) { i.NewEvents = 0 }), t0.Add(31 * time.Minute), "", false, true},
		{"idle acknowledged: resolve now and the update", with(func(i *Incident) { i.Status = StatusAcknowledged }),
			t0.Add(31 * time.Minute), ReasonUpdated, true, true},
		{"resolved is not resolved again", with(func(i *Incident) { i.Status, i.ResolvedCallDone = StatusResolved, true }),
			t0.Add(2 * time.Hour), "", false, false},
		{"fresh claim: nothing", with(func(i *Incident) {
			i.Pending = &PendingCall{RequestID: "r1", Reason: ReasonUpdated, HeartbeatAt: t0.Add(10 * time.Minute)}
		}), t0.Add(10*time.Minute + claimTimeout), "", false, false},
		{"stale claim: retried with its reason", with(func(i *Incident) {
			i.ReinvestigateRequested = true
			i.Pending = &PendingCall{RequestID: "r1", Reason: ReasonUpdated, HeartbeatAt: t0.Add(10 * time.Minute)}
		}), t0.Add(10*time.Minute + claimTimeout + time.Second), ReasonUpdated, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			reason, resolve, ok := Due(c.inc, set, c.now, claimTimeout)
			assert.Equal(t, c.reason, reason)
			assert.Equal(t, c.ok, ok)
			assert.Equal(t, c.resolve, resolve)
		})
	}
	t.Run("group_wait 0 opens at once", func(t *testing.T) {
		set := set
		set.GroupWait = 0
		reason, _, ok := Due(Incident{Status: StatusOpen, OpenedAt: t0, LastEventAt: t0, NewEvents: 1}, set, t0, claimTimeout)
		assert.True(t, ok)
		assert.Equal(t, ReasonOpened, reason)
	})
}

func TestParseID(t *testing.T) {
	fph := FingerprintHash("disk full on db-1")
	assert.Len(t, fph, 32)
	for id, want := range map[string]int{ID(fph, 1): 1, ID(fph, 42): 42} {
		got, gen, ok := ParseID(id)
		require.True(t, ok, id)
		assert.Equal(t, fph, got)
		assert.Equal(t, want, gen)
	}
	for _, bad := range []string{"", "inc_", "inc_" + fph, "inc_" + fph + "_", "inc_" + fph + "_0", "inc_" + fph + "_01",
		"inc_" + fph + "_-1", "inc_" + fph + "_1x", "inc_" + strings.ToUpper(fph) + "_1", "inc_" + fph[:31] + "_1",
		"inc_" + fph + "0_1", "INC_" + fph + "_1", "inc_" + fph + "_99999999999", "inc_" + fph + "_1.x",
		"inc_../" + fph[3:] + "_1", "inc_" + fph + "_1 "} {
		_, _, ok := ParseID(bad)
		assert.False(t, ok, bad)
	}
}

func FuzzParseID(f *testing.F) {
	fph := FingerprintHash("x")
	for _, s := range []string{ID(fph, 1), ID(fph, 1<<30), "inc_" + fph + "_0", "inc_x_1", "", "inc_" + fph + "_1\n", "inc_*.>_1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		fph, gen, ok := ParseID(id)
		if !ok {
			return
		}
		// Whatever passes is a key-safe token and says exactly what it parsed to.
		require.Equal(t, id, ID(fph, gen))
		require.True(t, validToken(id))
		require.GreaterOrEqual(t, gen, 1)
	})
}

func TestSettingsOf(t *testing.T) {
	s, err := SettingsOf(mirror.Pipeline{})
	require.NoError(t, err)
	assert.Equal(t, Settings{GroupWait: 30 * time.Second, GroupInterval: 5 * time.Minute, ResolveAfter: 30 * time.Minute}, s)

	s, err = SettingsOf(mirror.Pipeline{GroupWait: "0s", GroupInterval: "1s", ResolveAfter: "1s", ReopenWithin: "168h"})
	require.NoError(t, err)
	assert.Equal(t, Settings{GroupWait: 0, GroupInterval: time.Second, ResolveAfter: time.Second, ReopenWithin: 7 * 24 * time.Hour}, s)

	for field, p := range map[string]mirror.Pipeline{
		"group_wait":     {GroupWait: "2h"},
		"group_interval": {GroupInterval: "500ms"},
		"resolve_after":  {ResolveAfter: "8d"}, // not a Go duration
		"reopen_within":  {ReopenWithin: "-1s"},
	} {
		_, err := SettingsOf(p)
		require.Error(t, err, field)
		assert.True(t, strings.HasPrefix(err.Error(), field+":"), err.Error())
	}
}

func TestTimelineBounds(t *testing.T) {
	i := open("p1", FingerprintHash("f"), 1, Join{Fingerprint: "f", Events: 1, At: t0})
	// Events a few seconds apart merge into one entry while within a minute of it.
	for k := 1; k <= 5; k++ {
		i.join(t0.Add(time.Duration(k)*10*time.Second), 2)
	}
	require.Len(t, i.Timeline, 2)
	assert.Equal(t, int64(10), i.Timeline[1].Count)
	i.join(t0.Add(70*time.Second), 1) // a minute after the merged entry began
	require.Len(t, i.Timeline, 3)

	for k := range 300 {
		i.add(Entry{At: t0.Add(time.Duration(k) * time.Hour), Type: "chat"})
	}
	assert.Len(t, i.Timeline, maxTimeline)
	assert.Equal(t, 303-maxTimeline, i.TimelineDropped)
	assert.Equal(t, t0.Add(299*time.Hour), i.Timeline[maxTimeline-1].At)
}

func TestOpenBoundsTitleAndFingerprint(t *testing.T) {
	fp := strings.Repeat("é", 300) // 600 bytes
	i := open("p1", FingerprintHash(fp), 1, Join{Fingerprint: fp, Title: strings.Repeat("ü", 300), Events: 1, At: t0})
	assert.Equal(t, 200, len([]rune(i.Title)))
	assert.LessOrEqual(t, len(i.Fingerprint), 256)
	assert.True(t, strings.HasPrefix(fp, i.Fingerprint))
	// The id hashes the whole fingerprint: two that share their first 256 bytes differ.
	assert.NotEqual(t, FingerprintHash(fp), FingerprintHash(fp+"x"))

	i = open("p1", FingerprintHash(""), 1, Join{Title: "  disk\n full  ", Events: 1, At: t0})
	assert.Equal(t, "disk full", i.Title)
}

func TestSummaryJSON(t *testing.T) {
	i := open("p1", FingerprintHash("f"), 1, Join{Fingerprint: "f", Title: "t", Events: 3, At: t0})
	b, err := json.Marshal(i.Summary())
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	assert.NotContains(t, m, "resolved_at")
	assert.NotContains(t, m, "muted_until")
	for _, k := range []string{"id", "fingerprint", "title", "status", "opened_at", "updated_at", "events", "calls", "acknowledged_by", "last_result", "counts"} {
		assert.Contains(t, m, k)
	}
	assert.Equal(t, map[string]any{"events": 3.0, "new_events": 3.0, "calls": 0.0}, m["counts"])

	i.MutedUntil = time.Now().Add(time.Hour)
	i.resolve(t0.Add(time.Minute), "resolve_when", "")
	b, _ = json.Marshal(i.Detail())
	m = nil
	require.NoError(t, json.Unmarshal(b, &m))
	assert.Contains(t, m, "resolved_at")
	assert.Contains(t, m, "muted_until")
	assert.Len(t, m["timeline"], 2)
	assert.Equal(t, 0.0, m["timeline_dropped"])
}
