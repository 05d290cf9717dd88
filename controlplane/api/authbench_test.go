package api

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/controlplane/auth"
	"github.com/otelcol-svc/otelcol-svc/controlplane/service"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

// BenchmarkAuthenticatedRequest: what checking a login token against the account's login
// generation costs a request (GET /api/v1/me over SQLite), against the reference of the
// same run: a personal access token, whose row was always read on every request. The two
// alternate in benchRounds rounds:
//
//	go test -run XXX -bench BenchmarkAuthenticatedRequest -benchtime 3000x ./controlplane/api/
func BenchmarkAuthenticatedRequest(b *testing.B) {
	ctx := context.Background()
	st, err := store.Open(ctx, b.TempDir(), "")
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	if err := st.InTx(ctx, func(tx *store.Tx) error {
		return tx.CreateUser(ctx, store.User{ID: "u_1", Email: "u1@example.com", PasswordHash: "x", CreatedAt: now})
	}); err != nil {
		b.Fatal(err)
	}
	tokens, err := auth.NewTokens([]byte("test-secret-test-secret-test-secret-0123"), time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := &service.Service{Store: st, Logger: logger,
		Mirror: func(context.Context) (*mirror.Store, jetstream.JetStream, error) {
			return nil, nil, errors.New("no NATS")
		}}
	h := (&Server{Tokens: tokens, Logger: logger, Svc: svc}).Handler()
	login, err := tokens.IssueGeneration("u_1", "u1@example.com", 0, now)
	if err != nil {
		b.Fatal(err)
	}
	_, pat, err := svc.CreateAccessToken(ctx, "u_1", "bench", 1)
	if err != nil {
		b.Fatal(err)
	}
	// Rounds alternate the two, so a busy machine slows both alike.
	for range benchRounds {
		for _, c := range []struct{ name, token string }{{"reference=access_token", pat}, {"login_token", login}} {
			b.Run(c.name, func(b *testing.B) {
				for b.Loop() {
					r := httptest.NewRequest(http.MethodGet, "/api/v1/me", nil)
					r.Header.Set("Authorization", "Bearer "+c.token)
					w := httptest.NewRecorder()
					h.ServeHTTP(w, r)
					if w.Code != http.StatusOK {
						b.Fatalf("%d %s", w.Code, w.Body)
					}
				}
			})
		}
	}
}

const benchRounds = 6
