package projectauthextension

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/consoletoken"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

// TestKeyScopes: a project key does what its scopes say. A key made before scopes (an
// entry without them) sends, posts results and reads as before; a key without read is
// refused console reads, one without results agent results, one without ingest OTLP and
// events, each naming the missing scope; narrowing a key takes effect without a new key.
func TestKeyScopes(t *testing.T) {
	a, f := startWith(t, nil)
	ctx := context.Background()
	sendRead := apikey.Generate(apikey.KindProject)
	agentOnly := apikey.Generate(apikey.KindProject)
	require.NoError(t, f.m.PutKey(ctx, apikey.Hash(sendRead), mirror.KeyEntry{KeyID: "k_send", ProjectID: "p1", Scope: mirror.ScopeProject,
		Scopes: []string{mirror.PermIngest, mirror.PermResults}}))
	require.NoError(t, f.m.PutKey(ctx, apikey.Hash(agentOnly), mirror.KeyEntry{KeyID: "k_agent", ProjectID: "p1", Scope: mirror.ScopeProject,
		Scopes: []string{mirror.PermResults}}))
	require.Eventually(t, func() bool { _, ok := a.cache.Key(apikey.Hash(agentOnly)); return ok }, 5*time.Second, 5*time.Millisecond)

	h := func(k string) map[string][]string { return map[string][]string{"X-Api-Key": {k}} }
	ingest := func(k string) error { _, err := a.Authenticate(ctx, h(k)); return err }
	results := func(k string) error { _, err := a.AuthenticateResults(ctx, h(k)); return err }
	read := func(k string) error { _, err := a.AuthenticateConsole(ctx, h(k), "p1"); return err }

	// The fixture's key has no scopes in its entry: everything, as before.
	for name, do := range map[string]func(string) error{"ingest": ingest, "results": results, "read": read} {
		assert.NoError(t, do(f.project), "a key without scopes may %s", name)
	}
	assert.NoError(t, ingest(sendRead))
	assert.NoError(t, results(sendRead))
	refused := func(err error, scope string) {
		t.Helper()
		require.ErrorIs(t, err, principal.ErrInsufficientScope)
		assert.Contains(t, principal.Message(err, ""), "needs the "+scope+" scope")
		assert.Equal(t, "insufficient_scope", outcome(err))
	}
	refused(read(sendRead), "read")
	refused(ingest(agentOnly), "ingest")
	assert.NoError(t, results(agentOnly))
	refused(read(agentOnly), "read")

	// Another project's key stays a stranger, whatever its scopes.
	_, err := a.AuthenticateConsole(ctx, h(sendRead), "p2")
	assert.ErrorIs(t, err, principal.ErrNotFound)

	// Narrowing the fixture's key: it loses read at once, keeps the rest.
	require.NoError(t, f.m.PutKey(ctx, apikey.Hash(f.project), mirror.KeyEntry{KeyID: "k1", ProjectID: "p1", AccountID: "a1", Scope: mirror.ScopeProject,
		Scopes: []string{mirror.PermIngest, mirror.PermResults}}))
	require.Eventually(t, func() bool { return read(f.project) != nil }, 5*time.Second, 5*time.Millisecond)
	refused(read(f.project), "read")
	assert.NoError(t, ingest(f.project))
}

// TestReadOnlyConsoleToken: a console token minted with a read-only personal access
// token reads, but changes nothing even for the project's owner.
func TestReadOnlyConsoleToken(t *testing.T) {
	a, f := startWith(t, nil)
	ctx := context.Background()
	require.NoError(t, f.m.PutProject(ctx, mirror.Project{ID: "p1", AccountID: "a1", Version: 2,
		Members: map[string]int64{"u1": 1000}, Roles: map[string]string{"u1": "owner"}}))
	require.Eventually(t, func() bool { p, _ := a.cache.Project("p1"); return p.Version == 2 }, 5*time.Second, 10*time.Millisecond)
	bearer := func(readOnly bool) map[string][]string {
		tok, err := consoletoken.Issue(f.consolePriv, consoletoken.Claims{UserID: "u1", ProjectID: "p1", Grant: 1000, ReadOnly: readOnly}, time.Minute, time.Now())
		require.NoError(t, err)
		return map[string][]string{"Authorization": {"Bearer " + tok}}
	}
	_, err := a.AuthenticateConsole(ctx, bearer(true), "p1")
	require.NoError(t, err, "a read-only token reads")
	_, err = a.AuthorizeConsoleWrite(ctx, bearer(true), "p1")
	require.ErrorIs(t, err, ErrForbidden)
	assert.Contains(t, principal.Message(err, ""), "read-only")
	_, err = a.AuthorizeConsoleWrite(ctx, bearer(false), "p1")
	require.NoError(t, err, "the owner's token without the limit still writes")
}
