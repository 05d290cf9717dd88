package service

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/delivery"
	"github.com/otelcol-svc/otelcol-svc/internal/mailer"
	"github.com/otelcol-svc/otelcol-svc/internal/usage"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// noticeEnv is a project with an owner, an admin and a member (verified) and an admin
// whose address is not verified, on a fresh database of one kind, with mailpit and an
// in-process NATS.
type noticeEnv struct {
	dir, dbURL                             string
	db                                     *store.Store
	js                                     jetstream.JetStream
	mp                                     *testenv.Mailpit
	project                                string
	owner, admin, member, unverified, name string
}

func noticeDatabases(t *testing.T, fn func(t *testing.T, env noticeEnv)) {
	mp := testenv.StartMailpit(t, testenv.MailpitOptions{})
	for name, url := range map[string]func() string{
		"sqlite":   func() string { return "" },
		"postgres": func() string { return testenv.PostgresURL(t) },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			n := testenv.StartNATS(t)
			_, js := testenv.Connect(t, n.URL())
			env := noticeEnv{dir: t.TempDir(), dbURL: url(), js: js, mp: mp, project: NewID("p_"), name: name}
			var err error
			env.db, err = store.Open(ctx, env.dir, env.dbURL)
			require.NoError(t, err)
			t.Cleanup(func() { env.db.Close() })
			addr := func(who string) string { return who + "-" + name + "-" + strings.ToLower(env.project) + "@example.com" }
			env.owner, env.admin, env.member, env.unverified = addr("owner"), addr("admin"), addr("member"), addr("unverified")
			now := time.Now()
			require.NoError(t, env.db.InTx(ctx, func(tx *store.Tx) error {
				ids := map[string]string{}
				for _, a := range []string{env.owner, env.admin, env.member, env.unverified} {
					ids[a] = NewID("u_")
					if err := tx.CreateUser(ctx, store.User{ID: ids[a], Email: a, PasswordHash: "x", CreatedAt: now}); err != nil {
						return err
					}
					if a != env.unverified {
						if err := tx.VerifyEmail(ctx, ids[a], a, now); err != nil {
							return err
						}
					}
				}
				if err := tx.CreateProject(ctx, store.Project{ID: env.project, Name: "Shop <b>", OwnerID: ids[env.owner], Version: 1,
					PipelineVersion: 1, CreatedAt: now, UpdatedAt: now}); err != nil {
					return err
				}
				for a, role := range map[string]string{env.admin: store.RoleAdmin, env.member: store.RoleMember, env.unverified: store.RoleAdmin} {
					if err := tx.PutMember(ctx, env.project, ids[a], role); err != nil {
						return err
					}
				}
				return nil
			}))
			fn(t, env)
		})
	}
}

// controlPlane starts one control plane's notice watches on its own connection to env's
// database; smtp "" is one without email.
func (env noticeEnv) controlPlane(t *testing.T, smtp string) *Email {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	db, err := store.Open(ctx, env.dir, env.dbURL)
	require.NoError(t, err)
	var m *mailer.Mailer
	if smtp != "" {
		cfg, err := mailer.Parse(smtp, "svc@example.com")
		require.NoError(t, err)
		m = mailer.New(cfg)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	e := &Email{Svc: &Service{Store: db, Logger: logger}, Mailer: m, PublicURL: "https://svc.example.com", Logger: logger}
	wait := e.WatchNotices(ctx, func(context.Context) (jetstream.JetStream, error) { return env.js, nil })
	t.Cleanup(func() { cancel(); wait(); db.Close() })
	return e
}

// applied records which control plane handled which entry revision.
type applied struct {
	mu   sync.Mutex
	seen map[*Email]map[string]uint64
}

func watchApplied(t *testing.T) *applied {
	a := &applied{seen: map[*Email]map[string]uint64{}}
	noticeApplied = func(e *Email, kve jetstream.KeyValueEntry) {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.seen[e] == nil {
			a.seen[e] = map[string]uint64{}
		}
		a.seen[e][kve.Key()] = max(a.seen[e][kve.Key()], kve.Revision())
	}
	t.Cleanup(func() { noticeApplied = nil })
	return a
}

// waitAll waits until every control plane handled key at rev or later.
func (a *applied) waitAll(t *testing.T, key string, rev uint64, cps ...*Email) {
	t.Helper()
	require.Eventually(t, func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, e := range cps {
			if a.seen[e][key] < rev {
				return false
			}
		}
		return true
	}, 15*time.Second, 20*time.Millisecond, "every control plane handled %s", key)
}

// A failure notice the data plane decided is mailed once to the project's owner and
// admins with a verified address, not to members, not to unverified admins, however many
// control planes watch; the next interval's notice counts the failures since.
func TestFailureNoticeMailedOnceToOwnersAndAdmins(t *testing.T) {
	a := watchApplied(t)
	noticeDatabases(t, func(t *testing.T, env noticeEnv) {
		ctx := context.Background()
		kv, err := env.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: delivery.FailureBucket, History: 1})
		require.NoError(t, err)
		cp1, cp2 := env.controlPlane(t, env.mp.SMTPURL()), env.controlPlane(t, env.mp.SMTPURL())

		// As the data plane writes it (delivery/notices.go): a first notice decided ...
		t0 := time.Now().UTC().Add(-10 * time.Minute)
		put := func(v map[string]any) uint64 {
			b, _ := json.Marshal(v)
			rev, err := kv.Put(ctx, env.project, b)
			require.NoError(t, err)
			return rev
		}
		rev := put(map[string]any{"sent": t0})
		first := env.mp.WaitFor(t, env.owner, "Deliveries failed in Shop", 1)
		env.mp.WaitFor(t, env.admin, "Deliveries failed in Shop", 1)
		a.waitAll(t, env.project, rev, cp1, cp2)
		assert.Len(t, env.mp.Messages(t, env.owner), 1, "two control planes mail once")
		assert.Len(t, env.mp.Messages(t, env.admin), 1, "two control planes mail once")
		assert.Empty(t, env.mp.Messages(t, env.member), "members are not mailed")
		assert.Empty(t, env.mp.Messages(t, env.unverified), "unverified addresses are not mailed")
		link := "https://svc.example.com/projects/" + env.project + "/deliveries"
		assert.Contains(t, first.Text, link)
		assert.Contains(t, first.HTML, `href="`+link+`"`)
		assert.Contains(t, first.HTML, "Shop &lt;b&gt;", "the project's name is escaped in HTML")

		// ... failures counted during its interval ...
		rev = put(map[string]any{"sent": t0, "pending": 7, "since": t0.Add(time.Minute)})
		a.waitAll(t, env.project, rev, cp1, cp2)
		assert.Len(t, env.mp.Messages(t, env.owner), 1, "counted failures wait for the interval's end")
		// ... and told with the next notice: one more mail, saying how many.
		rev = put(map[string]any{"sent": t0.Add(5 * time.Minute)})
		next := env.mp.WaitFor(t, env.owner, "Deliveries failed in Shop", 2)
		a.waitAll(t, env.project, rev, cp1, cp2)
		assert.Len(t, env.mp.Messages(t, env.owner), 2)
		assert.Contains(t, next.Text, "at least 7 deliveries failed since "+t0.Add(time.Minute).Format("2006-01-02 15:04 UTC"))
		assert.Contains(t, first.Text, "at least 1 delivery failed since")
	})
}

// Crossing 80% of the month's events with the real meter mails the account's owner once,
// however many control planes watch.
func TestUsageNoticeMailedOnceToOwner(t *testing.T) {
	a := watchApplied(t)
	noticeDatabases(t, func(t *testing.T, env noticeEnv) {
		ctx := context.Background()
		var ownerID string
		require.NoError(t, env.db.InTx(ctx, func(tx *store.Tx) error {
			u, err := tx.UserByEmail(ctx, env.owner)
			ownerID = u.ID
			return err
		}))
		m, err := usage.Open(ctx, env.js, usage.Config{DefaultLimit: 100})
		require.NoError(t, err)
		cp1, cp2 := env.controlPlane(t, env.mp.SMTPURL()), env.controlPlane(t, env.mp.SMTPURL())
		r, err := m.Reserve(ctx, ownerID, env.project, 85)
		require.NoError(t, err)
		r.Commit()
		require.NoError(t, m.Close(ctx)) // waits for the notice's claim and send

		got := env.mp.WaitFor(t, env.owner, "80% of this month's events", 1)
		kv, err := env.js.KeyValue(ctx, usage.BucketUsage)
		require.NoError(t, err)
		keys, err := kv.ListKeysFiltered(ctx, "n.>")
		require.NoError(t, err)
		var key string
		for k := range keys.Keys() {
			key = k
		}
		require.NotEmpty(t, key)
		e, err := kv.Get(ctx, key)
		require.NoError(t, err)
		a.waitAll(t, key, e.Revision(), cp1, cp2)
		assert.Len(t, env.mp.Messages(t, env.owner), 1, "one mail for the claim and its marking sent, from two control planes")
		assert.Contains(t, got.Text, "80% of this month's 100 events (85 so far)")
		assert.Contains(t, got.Text, "https://svc.example.com/usage")
		assert.Empty(t, env.mp.Messages(t, env.admin), "a usage notice is the account owner's")
	})
}

// Without SMTP the watches do not start: nothing is mailed, nothing fails.
func TestNoticeMailOffWatchesNothing(t *testing.T) {
	a := watchApplied(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := &Email{Svc: &Service{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), PublicURL: "https://svc.example.com"}
	called := false
	wait := e.WatchNotices(ctx, func(context.Context) (jetstream.JetStream, error) { called = true; return nil, nil })
	wait() // returns at once: nothing runs
	assert.False(t, called, "NATS is not even asked")
	assert.Empty(t, a.seen)
}
