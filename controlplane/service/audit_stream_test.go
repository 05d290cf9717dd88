package service

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// auditStreamEnv is a database holding projects pa and pb (owned by one user) and the
// NATS the receivers publish audit records to.
type auditStreamEnv struct {
	dir, dbURL string
	db         *store.Store
	nc         *nats.Conn
	js         jetstream.JetStream
	ownerID    string
	email      string
}

func auditStreamDatabases(t *testing.T, fn func(t *testing.T, env auditStreamEnv)) {
	for name, url := range map[string]func() string{
		"sqlite":   func() string { return "" },
		"postgres": func() string { return testenv.PostgresURL(t) },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			n := testenv.StartNATS(t)
			nc, js := testenv.Connect(t, n.URL())
			env := auditStreamEnv{dir: t.TempDir(), dbURL: url(), nc: nc, js: js, ownerID: NewID("u_")}
			env.email = env.ownerID + "@example.com"
			var err error
			env.db, err = store.Open(ctx, env.dir, env.dbURL)
			require.NoError(t, err)
			t.Cleanup(func() { env.db.Close() })
			now := time.Now()
			require.NoError(t, env.db.InTx(ctx, func(tx *store.Tx) error {
				if err := tx.CreateUser(ctx, store.User{ID: env.ownerID, Email: env.email, PasswordHash: "x", CreatedAt: now}); err != nil {
					return err
				}
				for _, p := range []string{"pa", "pb"} {
					if err := tx.CreateProject(ctx, store.Project{ID: p, Name: p, OwnerID: env.ownerID, Version: 1,
						PipelineVersion: 1, CreatedAt: now, UpdatedAt: now}); err != nil {
						return err
					}
				}
				return nil
			}))
			fn(t, env)
		})
	}
}

// controlPlane starts one control plane's audit consumer on its own database connection.
func (env auditStreamEnv) controlPlane(t *testing.T) *AuditWatch {
	t.Helper()
	db, err := store.Open(context.Background(), env.dir, env.dbURL)
	require.NoError(t, err)
	svc := &Service{Store: db, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	w, err := svc.WatchReplays(env.nc)
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Unsubscribe(); db.Close() })
	return w
}

// publish puts a record on the audit stream as a receiver's console does.
func (env auditStreamEnv) publish(t *testing.T, project string, r streams.AuditRecord) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, streams.Ensure(ctx, env.js, streams.AuditConfig(1)))
	b, err := json.Marshal(r)
	require.NoError(t, err)
	_, err = env.js.PublishMsg(ctx, &nats.Msg{Subject: streams.AuditSubject(project), Data: b,
		Header: nats.Header{streams.HeaderMsgID: []string{r.ID}}})
	require.NoError(t, err)
}

// settled waits until the control planes took and acknowledged every record.
func (env auditStreamEnv) settled(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		c, err := env.js.Consumer(context.Background(), streams.AuditStream, AuditConsumer)
		if err != nil {
			return false
		}
		info, err := c.Info(context.Background())
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.NumRedelivered == 0
	}, 15*time.Second, 10*time.Millisecond)
}

func (env auditStreamEnv) log(t *testing.T, project string) []store.AuditEvent {
	t.Helper()
	var out []store.AuditEvent
	require.NoError(t, env.db.InTx(context.Background(), func(tx *store.Tx) error {
		var err error
		out, err = tx.AuditEvents(context.Background(), store.AuditQuery{ProjectID: project})
		return err
	}))
	return out
}

// A replay queued while no control plane runs is in the project's log once one starts,
// with who asked (the console token's user) and their address.
func TestAuditStreamReplayWhileControlPlaneStopped(t *testing.T) {
	auditStreamDatabases(t, func(t *testing.T, env auditStreamEnv) {
		at := time.Now().UTC().Truncate(time.Millisecond)
		env.publish(t, "pa", streams.AuditRecord{ID: "deadletter.replay:pa:rpl_1", Action: streams.AuditReplay, At: at,
			Actor: "user:" + env.ownerID, Scope: "console", Target: "rpl_1", Addr: "192.0.2.7", Details: map[string]any{"deliveries": 2}})
		env.controlPlane(t)
		env.settled(t)
		recs := env.log(t, "pa")
		require.Len(t, recs, 1)
		r := recs[0]
		assert.Equal(t, "deadletter.replay", r.Action)
		assert.Equal(t, "rpl_1", r.Target)
		assert.Equal(t, env.ownerID, r.ActorID)
		assert.Equal(t, env.email, r.ActorEmail)
		assert.Equal(t, store.CredConsole, r.CredKind)
		assert.Equal(t, "192.0.2.7", r.Addr)
		assert.True(t, at.Equal(r.At), "%s %s", at, r.At)
		assert.JSONEq(t, `{"deliveries":{"to":2}}`, string(r.Changes))
	})
}

// A person's incident action at a receiver lands in the project's log with who, from where
// and what the incident became; an action name that is not a word is refused.
func TestAuditStreamIncidentAction(t *testing.T) {
	auditStreamDatabases(t, func(t *testing.T, env auditStreamEnv) {
		env.controlPlane(t)
		at := time.Now().UTC().Truncate(time.Millisecond)
		env.publish(t, "pa", streams.AuditRecord{ID: "incident.resolve:pa:inc_1:1", Action: streams.AuditIncidentPrefix + "resolve", At: at,
			Actor: "user:" + env.ownerID, Scope: "console", Target: "inc_1", Addr: "192.0.2.9", Details: map[string]any{"status": "resolved"}})
		env.settled(t)
		recs := env.log(t, "pa")
		require.Len(t, recs, 1)
		assert.Equal(t, "incident.resolve", recs[0].Action)
		assert.Equal(t, "inc_1", recs[0].Target)
		assert.Equal(t, env.email, recs[0].ActorEmail)
		assert.Equal(t, "192.0.2.9", recs[0].Addr)
		assert.JSONEq(t, `{"status":{"to":"resolved"}}`, string(recs[0].Changes))
	})
	_, _, ok := parseAuditMsg("svc-audit.pa", []byte(`{"id":"x","action":"incident.drop table"}`))
	assert.False(t, ok)
}

// A key's reads in one hour are one record, however many receivers published it and
// control planes took it; project A's reads never land in B's log, and a record on B's
// subject naming A is B's.
func TestAuditStreamKeyReadsOncePerHourAndIsolated(t *testing.T) {
	auditStreamDatabases(t, func(t *testing.T, env auditStreamEnv) {
		env.controlPlane(t)
		env.controlPlane(t)
		hour := time.Now().UTC().Truncate(time.Hour)
		read := streams.AuditRecord{ID: streams.AuditReadID("pa", "key_a", "deliveries", hour), Action: streams.AuditKeyRead,
			At: hour, Actor: "key_a", Scope: "read", Surface: "deliveries", Addr: "192.0.2.8"}
		for i := 0; i < 3; i++ {
			env.publish(t, "pa", read)
		}
		// The same record again past the stream's duplicate window (another id on the
		// wire): the log still keeps one.
		again := read
		b, err := json.Marshal(again)
		require.NoError(t, err)
		_, err = env.js.PublishMsg(context.Background(), &nats.Msg{Subject: streams.AuditSubject("pa"), Data: b})
		require.NoError(t, err)
		env.publish(t, "pb", streams.AuditRecord{ID: streams.AuditReadID("pa", "key_b", "events", hour), Action: streams.AuditKeyRead,
			At: hour, Actor: "key_b", Surface: "events"})
		env.settled(t)

		a := env.log(t, "pa")
		require.Len(t, a, 1, "%+v", a)
		assert.Equal(t, "key.read", a[0].Action)
		assert.Equal(t, "deliveries", a[0].Target)
		assert.Equal(t, store.CredProjectKey, a[0].CredKind)
		assert.Equal(t, "key_a", a[0].CredID)
		assert.Equal(t, "192.0.2.8", a[0].Addr)
		b2 := env.log(t, "pb")
		require.Len(t, b2, 1, "%+v", b2)
		assert.Equal(t, "key_b", b2[0].CredID, "filed under the subject's project")
	})
}
