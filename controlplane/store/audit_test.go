package store

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

// A change carrying an audit record commits with it or not at all; a read-only
// transaction does not take the record; pages go newest first by cursor; the sweep drops
// what is past retention.
func TestAuditLogWithTheChange(t *testing.T) {
	eachDatabase(t, func(t *testing.T, open func([]string) *Store) {
		s := open(migrations)
		now := time.Now().UTC().Truncate(time.Millisecond)
		inTx(t, s, func(ctx context.Context, tx *Tx) error {
			return tx.CreateUser(ctx, User{ID: "u_1", Email: "a@example.com", PasswordHash: "x", CreatedAt: now})
		})

		// A read first: the record waits for the transaction that writes.
		ev := &AuditEvent{ProjectID: "p_1", ActorID: "u_1", ActorEmail: "a@example.com", Action: "member.remove", Target: "u_2"}
		ctx := WithAudit(context.Background(), ev)
		require.NoError(t, s.InTx(ctx, func(tx *Tx) error { _, err := tx.UserByID(ctx, "u_1"); return err }))
		// The change fails: neither it nor its record stays.
		boom := errors.New("mirror refused")
		err := s.InTx(ctx, func(tx *Tx) error {
			require.NoError(t, tx.CreateUser(ctx, User{ID: "u_2", Email: "b@example.com", PasswordHash: "x", CreatedAt: now}))
			return boom
		})
		require.ErrorIs(t, err, boom)
		list := func(q AuditQuery) []AuditEvent {
			var out []AuditEvent
			inTx(t, s, func(ctx context.Context, tx *Tx) error {
				var err error
				out, err = tx.AuditEvents(ctx, q)
				return err
			})
			return out
		}
		assert.Empty(t, list(AuditQuery{ProjectID: "p_1"}), "nothing recorded for a read or a rolled-back change")
		// The change commits: its record with it, once.
		require.NoError(t, s.InTx(ctx, func(tx *Tx) error {
			return tx.CreateUser(ctx, User{ID: "u_2", Email: "b@example.com", PasswordHash: "x", CreatedAt: now})
		}))
		require.NoError(t, s.InTx(ctx, func(tx *Tx) error {
			return tx.CreateUser(ctx, User{ID: "u_3", Email: "c@example.com", PasswordHash: "x", CreatedAt: now})
		}))
		got := list(AuditQuery{ProjectID: "p_1"})
		require.Len(t, got, 1)
		assert.Equal(t, "member.remove", got[0].Action)
		assert.Equal(t, "a@example.com", got[0].ActorEmail)
		assert.WithinDuration(t, time.Now(), got[0].At, time.Minute)

		// Pages and filters.
		inTx(t, s, func(ctx context.Context, tx *Tx) error {
			for i, a := range []string{"sink.create", "sink.update", "pipeline.update", "sinkx.other"} {
				require.NoError(t, tx.AddAudit(ctx, AuditEvent{ProjectID: "p_1", Action: a, At: now.Add(time.Duration(i+1) * time.Second)}))
			}
			require.NoError(t, tx.AddAudit(ctx, AuditEvent{AccountID: "u_1", Action: "password.change", At: now}))
			// A replay seen twice is one record.
			for range 2 {
				require.NoError(t, tx.AddAudit(ctx, AuditEvent{ProjectID: "p_1", Action: "deadletter.replay", Dedupe: "r_1", At: now.Add(-time.Hour)}))
			}
			return nil
		})
		all := list(AuditQuery{ProjectID: "p_1"})
		require.Len(t, all, 6)
		assert.Equal(t, "sinkx.other", all[0].Action, "newest first")
		page := list(AuditQuery{ProjectID: "p_1", Limit: 2, Before: AuditCursor{At: all[1].At.UnixMilli(), ID: all[1].ID}})
		require.Len(t, page, 2)
		assert.Equal(t, all[2].ID, page[0].ID)
		assert.Equal(t, all[3].ID, page[1].ID)
		sinks := list(AuditQuery{ProjectID: "p_1", Action: "sink"})
		assert.Equal(t, []string{"sink.update", "sink.create"}, actions(sinks), "a prefix matches whole words")
		assert.Equal(t, []string{"password.change"}, actions(list(AuditQuery{AccountID: "u_1"})))
		assert.Empty(t, list(AuditQuery{AccountID: ""}), "no account: none of the project records")

		n, err := s.SweepAudit(context.Background(), now.Add(-time.Minute), 1000)
		require.NoError(t, err)
		assert.Equal(t, int64(1), n)
		assert.Len(t, list(AuditQuery{ProjectID: "p_1"}), 5)
	})
}

func actions(evs []AuditEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Action
	}
	return out
}

// No secret of a destination, a project or a token reaches the record, while the
// other changed fields are there to read.
func TestAuditChangesNeverHoldSecrets(t *testing.T) {
	secrets := []string{"xoxb-bot-token-1", "sig-secret-2", "Bearer hdr-3", "T000/B000/webhook-path-4", "pw-5", "whsec_6", "hash-7", "query-token-8"}
	before := mirror.Sink{ID: "s_1", Kind: "slack_app", URL: "https://hooks.slack.com/services/T000/B000/webhook-path-4",
		Headers: map[string]string{"Authorization": "Bearer hdr-3"}, BotToken: "xoxb-bot-token-1", SigningSecret: "sig-secret-2", Channel: "#a"}
	after := before
	after.Channel = "#b"
	after.BotToken = "xoxb-other"
	after.URL = "https://example.com/hook?token=query-token-8"
	var ev AuditEvent
	ev.Change(before, after)
	ev2 := AuditEvent{}
	ev2.Change(nil, map[string]any{"signing_secret": "whsec_6", "password": "pw-5", "key_hash": "hash-7", "name": "n"})
	for _, e := range []AuditEvent{ev, ev2} {
		for _, sec := range secrets {
			assert.NotContains(t, string(e.Changes), sec)
		}
	}
	c := string(ev.Changes)
	assert.Contains(t, c, `"channel":{"from":"#a","to":"#b"}`)
	assert.Contains(t, c, `"bot_token":{"from":"[redacted]","to":"[redacted] (changed)"}`)
	assert.Contains(t, c, `https://example.com/… (#`)
	assert.NotContains(t, c, `"kind"`, "unchanged fields are left out")
	assert.True(t, strings.Contains(string(ev2.Changes), `"name":{"to":"n"}`))

	// What people write (OTTL, templates) may hold a literal secret under no telling
	// name: a digest per statement, which still shows which one changed.
	ev3 := AuditEvent{}
	ev3.Change(map[string]any{"transforms": []string{`set(event["a"], 1)`, `set(event["k"], "ottl-secret-9")`}, "text_template": ""},
		map[string]any{"transforms": []string{`set(event["a"], 1)`, `set(event["k"], "ottl-secret-10")`}, "text_template": "key tmpl-secret-11"})
	c3 := string(ev3.Changes)
	for _, sec := range []string{"ottl-secret-9", "ottl-secret-10", "tmpl-secret-11"} {
		assert.NotContains(t, c3, sec)
	}
	var d map[string]map[string]any
	require.NoError(t, json.Unmarshal(ev3.Changes, &d))
	from, to := d["transforms"]["from"].([]any), d["transforms"]["to"].([]any)
	assert.Equal(t, from[0], to[0], "the same statement digests alike")
	assert.NotEqual(t, from[1], to[1], "a changed one does not")
	assert.Equal(t, "", d["text_template"]["from"])
	assert.Contains(t, d["text_template"]["to"], "[as written, #")
}
