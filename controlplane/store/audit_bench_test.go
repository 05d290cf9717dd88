package store

import (
	"context"
	"testing"
	"time"
)

// BenchmarkAuditedChange is the cost the audit record adds to a change: the same small
// update (a member's role) in its own transaction, without and with a pending record,
// in alternating rounds of 200 each, on SQLite; the ratio is reported as audited/plain.
func BenchmarkAuditedChange(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, b.TempDir(), "")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	now := time.Now().UTC()
	if err := s.InTx(ctx, func(tx *Tx) error {
		if err := tx.CreateUser(ctx, User{ID: "u_1", Email: "a@example.com", PasswordHash: "x", CreatedAt: now}); err != nil {
			return err
		}
		if err := tx.CreateUser(ctx, User{ID: "u_2", Email: "b@example.com", PasswordHash: "x", CreatedAt: now}); err != nil {
			return err
		}
		if err := tx.CreateProject(ctx, Project{ID: "p_1", Name: "one", OwnerID: "u_1", Version: 1, CreatedAt: now, UpdatedAt: now}); err != nil {
			return err
		}
		return tx.PutMember(ctx, "p_1", "u_2", RoleMember)
	}); err != nil {
		b.Fatal(err)
	}
	change := func(ctx context.Context, i int) error {
		role := RoleMember
		if i%2 == 0 {
			role = RoleAdmin
		}
		return s.InTx(ctx, func(tx *Tx) error { return tx.PutMember(ctx, "p_1", "u_2", role) })
	}
	audited := func(i int) error {
		ev := &AuditEvent{ProjectID: "p_1", ActorID: "u_1", ActorEmail: "a@example.com", CredKind: CredSession, CredID: "ses_1",
			Action: "member.role", Target: "u_2", Addr: "192.0.2.1"}
		ev.Change(map[string]string{"role": RoleMember}, map[string]string{"role": RoleAdmin})
		return change(WithAudit(ctx, ev), i)
	}
	plain := func(i int) error { return change(ctx, i) }
	// Rounds alternate, so that the table's growth and the machine's load weigh on both.
	const round = 200
	var tPlain, tAudited time.Duration
	n := 0
	for b.Loop() {
		for _, side := range []struct {
			fn  func(int) error
			acc *time.Duration
		}{{plain, &tPlain}, {audited, &tAudited}} {
			start := time.Now()
			for i := range round {
				if err := side.fn(i); err != nil {
					b.Fatal(err)
				}
			}
			*side.acc += time.Since(start)
		}
		n += round
	}
	b.ReportMetric(float64(tPlain.Microseconds())/float64(n), "µs/plain-change")
	b.ReportMetric(float64(tAudited.Microseconds())/float64(n), "µs/audited-change")
	b.ReportMetric(float64(tAudited)/float64(tPlain), "audited/plain")
}
