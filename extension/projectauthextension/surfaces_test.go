package projectauthextension

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/extension/extensiontest"

	"github.com/otelcol-svc/otelcol-svc/extension/projectauthextension/internal/metadata"
	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/consoletoken"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

func TestPushIngestAuthSetting(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	for name, off := range map[string]bool{"": false, "ingest_off": true, "ingest_bool": true, "ingest_token": false} {
		sub, err := cm.Sub(component.MustNewIDWithName("projectauth", name).String())
		require.NoError(t, err)
		cfg := createDefaultConfig().(*Config)
		require.NoError(t, sub.Unmarshal(cfg))
		assert.Equal(t, off, cfg.PushIngest.authOff(), name)
	}
}

type fixture struct {
	m                      *mirror.Store
	project, ingest, other string
	projectB               string
	consolePriv            ed25519.PrivateKey
}

// startWith starts the extension with cfg against a mirror holding project p1 (project key,
// source s1 with its ingest key, source s2 with its own) and project p2 (a project key).
func startWith(t *testing.T, mutate func(*Config)) (*authenticator, fixture) {
	t.Helper()
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	ctx := context.Background()
	m, err := mirror.Open(ctx, js, 1)
	require.NoError(t, err)
	f := fixture{m: m, project: apikey.Generate(apikey.KindProject), ingest: apikey.Generate(apikey.KindIngest),
		other: apikey.Generate(apikey.KindIngest), projectB: apikey.Generate(apikey.KindProject)}
	require.NoError(t, m.PutProject(ctx, mirror.Project{ID: "p1", AccountID: "a1", Version: 1, Members: map[string]int64{"u1": 1000, "u2": 2000}}))
	require.NoError(t, m.PutKey(ctx, apikey.Hash(f.project), mirror.KeyEntry{KeyID: "k1", ProjectID: "p1", AccountID: "a1", Scope: mirror.ScopeProject}))
	require.NoError(t, m.PutKey(ctx, apikey.Hash(f.projectB), mirror.KeyEntry{KeyID: "kb", ProjectID: "p2", Scope: mirror.ScopeProject}))
	require.NoError(t, m.PutKey(ctx, apikey.Hash(f.ingest), mirror.KeyEntry{KeyID: "k2", ProjectID: "p1", AccountID: "a1", Scope: mirror.ScopeIngest, SourceID: "s1"}))
	require.NoError(t, m.PutKey(ctx, apikey.Hash(f.other), mirror.KeyEntry{KeyID: "k3", ProjectID: "p1", Scope: mirror.ScopeIngest, SourceID: "s2"}))
	require.NoError(t, m.PutSource(ctx, "in_one", mirror.Source{ID: "s1", ProjectID: "p1", Name: "github"}))
	require.NoError(t, m.PutSource(ctx, "in_two", mirror.Source{ID: "s2", ProjectID: "p1", Name: "stripe"}))
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	f.consolePriv = priv
	require.NoError(t, m.PutConsoleKeys(ctx, mirror.ConsoleKeys{PublicKeys: []string{base64.StdEncoding.EncodeToString(pub)}}))

	cfg := createDefaultConfig().(*Config)
	if mutate != nil {
		mutate(cfg)
	}
	ext, err := NewFactory().Create(ctx, extensiontest.NewNopSettings(metadata.Type), cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(ctx, mirrorHost(t, n.URL())))
	t.Cleanup(func() { _ = ext.Shutdown(context.Background()) })
	a := ext.(*authenticator)
	require.Eventually(t, func() bool { return a.cache.Ready() && len(a.cache.ConsoleKeys()) == 1 }, 10*time.Second, 10*time.Millisecond)
	return a, f
}

func ingestAs(a *authenticator, ingestKey string, headers map[string][]string) (principal.Principal, error) {
	ctx, src, err := a.AuthenticateIngest(context.Background(), headers, ingestKey)
	if err != nil {
		return principal.Principal{}, err
	}
	p, _ := principal.FromContext(ctx)
	if p.SourceID != src.ID {
		panic("principal and source disagree")
	}
	return p, nil
}

func TestPushIngestWithIngestKey(t *testing.T) {
	a, f := startWith(t, nil)
	p, err := ingestAs(a, "in_one", map[string][]string{"Authorization": {"Bearer " + f.ingest}})
	require.NoError(t, err)
	assert.Equal(t, principal.Principal{ProjectID: "p1", KeyID: "k2", AccountID: "a1", Scope: mirror.ScopeIngest, SourceID: "s1"}, p)

	for name, c := range map[string]struct {
		key     string
		headers map[string][]string
		want    error
		msg     string
	}{
		"unknown ingest URL":      {"in_nope", map[string][]string{"Authorization": {"Bearer " + f.ingest}}, principal.ErrNotFound, "no push source"},
		"no credentials":          {"in_one", map[string][]string{}, principal.ErrMissingKey, "needs authentication"},
		"ingest key in X-API-Key": {"in_one", map[string][]string{"X-Api-Key": {f.ingest}}, principal.ErrMissingKey, "Authorization: Bearer"},
		"another source's key":    {"in_two", map[string][]string{"Authorization": {"Bearer " + f.ingest}}, principal.ErrInvalidKey, "another source"},
		"project key":             {"in_one", map[string][]string{"Authorization": {"Bearer " + f.project}}, principal.ErrInvalidKey, "project API key"},
		"unknown key":             {"in_one", map[string][]string{"Authorization": {"Bearer osi_nope"}}, principal.ErrInvalidKey, "unknown or revoked"},
		"service token unset":     {"in_one", map[string][]string{"X-Service-Token": {"0123456789abcdef0123"}}, principal.ErrInvalidToken, "SERVICE_INGEST_TOKEN is unset"},
	} {
		_, err := ingestAs(a, c.key, c.headers)
		assert.ErrorIs(t, err, c.want, name)
		assert.Contains(t, principal.Message(err, ""), c.msg, name)
	}

	// Revoking the ingest key (deleting the source) stops it.
	require.NoError(t, f.m.DeleteKey(context.Background(), apikey.Hash(f.ingest)))
	require.Eventually(t, func() bool {
		_, err := ingestAs(a, "in_one", map[string][]string{"Authorization": {"Bearer " + f.ingest}})
		return err != nil
	}, 5*time.Second, 5*time.Millisecond)
}

func TestPushIngestWithServiceToken(t *testing.T) {
	const tok = "0123456789abcdef0123"
	a, f := startWith(t, func(c *Config) { c.PushIngest.ServiceToken = tok })
	for name, h := range map[string]map[string][]string{
		"X-Service-Token":         {"X-Service-Token": {tok}},
		"bearer":                  {"Authorization": {"Bearer " + tok}},
		"ingest key still works":  {"Authorization": {"Bearer " + f.ingest}},
		"any one valid is enough": {"Authorization": {"Bearer wrong"}, "X-Service-Token": {tok}},
	} {
		p, err := ingestAs(a, "in_one", h)
		require.NoError(t, err, name)
		assert.Equal(t, "p1", p.ProjectID, name)
	}
	// The service token opens every source.
	p, err := ingestAs(a, "in_two", map[string][]string{"X-Service-Token": {tok}})
	require.NoError(t, err)
	assert.Equal(t, "s2", p.SourceID)

	_, err = ingestAs(a, "in_one", map[string][]string{"X-Service-Token": {tok + "x"}})
	assert.ErrorIs(t, err, principal.ErrInvalidToken)
	_, err = ingestAs(a, "in_one", map[string][]string{"Authorization": {"Bearer " + tok[:10]}})
	assert.ErrorIs(t, err, principal.ErrInvalidKey)
	_, err = ingestAs(a, "in_one", nil)
	assert.ErrorIs(t, err, principal.ErrMissingKey)
}

func TestPushIngestAuthOff(t *testing.T) {
	a, _ := startWith(t, func(c *Config) { c.PushIngest.Auth = "off" })
	p, err := ingestAs(a, "in_two", nil)
	require.NoError(t, err)
	assert.Equal(t, principal.Principal{ProjectID: "p1", AccountID: "a1", Scope: mirror.ScopeIngest, SourceID: "s2"}, p)
	// The ingest URL itself stays a secret.
	_, err = ingestAs(a, "in_nope", nil)
	assert.ErrorIs(t, err, principal.ErrNotFound)
}

func TestConsoleAuth(t *testing.T) {
	a, f := startWith(t, nil)
	console := func(projectID string, h map[string][]string) (principal.Principal, error) {
		ctx, err := a.AuthenticateConsole(context.Background(), h, projectID)
		p, _ := principal.FromContext(ctx)
		return p, err
	}
	tokenOf := func(user string, grant int64, project string, priv ed25519.PrivateKey) string {
		tok, err := consoletoken.Issue(priv, consoletoken.Claims{UserID: user, ProjectID: project, Grant: grant}, time.Minute, time.Now())
		require.NoError(t, err)
		return tok
	}
	token := func(project string, priv ed25519.PrivateKey) string { return tokenOf("u1", 1000, project, priv) }
	p, err := console("p1", map[string][]string{"X-Api-Key": {f.project}})
	require.NoError(t, err)
	assert.Equal(t, "k1", p.KeyID)
	_, err = console("p1", map[string][]string{"Authorization": {"Bearer " + f.project}})
	require.NoError(t, err)
	p, err = console("p1", map[string][]string{"Authorization": {"Bearer " + token("p1", f.consolePriv)}})
	require.NoError(t, err)
	assert.Equal(t, principal.Principal{ProjectID: "p1", Scope: principal.ScopeConsole, KeyID: "user:u1"}, p)

	_, otherPriv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	for name, c := range map[string]struct {
		project string
		headers map[string][]string
		want    error
	}{
		"nothing":                {"p1", map[string][]string{}, principal.ErrMissingKey},
		"B's key for A":          {"p1", map[string][]string{"X-Api-Key": {f.projectB}}, principal.ErrNotFound},
		"A's key for B":          {"p2", map[string][]string{"X-Api-Key": {f.project}}, principal.ErrNotFound},
		"A's key, no project":    {"nope", map[string][]string{"X-Api-Key": {f.project}}, principal.ErrNotFound},
		"token for another":      {"p2", map[string][]string{"Authorization": {"Bearer " + token("p1", f.consolePriv)}}, principal.ErrNotFound},
		"token signed elsewhere": {"p1", map[string][]string{"Authorization": {"Bearer " + token("p1", otherPriv)}}, principal.ErrInvalidToken},
		"ingest key":             {"p1", map[string][]string{"X-Api-Key": {f.ingest}}, principal.ErrInvalidKey},
		"unknown key":            {"p1", map[string][]string{"X-Api-Key": {"osk_nope"}}, principal.ErrInvalidKey},
	} {
		_, err := console(c.project, c.headers)
		assert.ErrorIs(t, err, c.want, name)
		assert.NotEmpty(t, principal.Message(err, ""), name)
	}

	// A token lives up to an hour; the membership it names ends it sooner. Removed
	// (the control plane publishes the project without the user): answered like a
	// stranger. Added again (another grant): the old token is refused, a new one works.
	bearerOf := func(tok string) map[string][]string { return map[string][]string{"Authorization": {"Bearer " + tok}} }
	u2 := tokenOf("u2", 2000, "p1", f.consolePriv)
	_, err = console("p1", bearerOf(u2))
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, f.m.PutProject(ctx, mirror.Project{ID: "p1", AccountID: "a1", Version: 1, Members: map[string]int64{"u1": 1000}}))
	require.Eventually(t, func() bool {
		_, err := console("p1", bearerOf(u2))
		return errors.Is(err, principal.ErrNotFound)
	}, 5*time.Second, time.Millisecond, "a removed member's token still opens the project")
	_, err = console("p1", bearerOf(token("p1", f.consolePriv)))
	require.NoError(t, err, "the other member's token still works")
	require.NoError(t, f.m.PutProject(ctx, mirror.Project{ID: "p1", AccountID: "a1", Version: 1, Members: map[string]int64{"u1": 1000, "u2": 3000}}))
	require.Eventually(t, func() bool {
		_, err := console("p1", bearerOf(tokenOf("u2", 3000, "p1", f.consolePriv)))
		return err == nil
	}, 5*time.Second, time.Millisecond, "a member added again gets in with a new token")
	_, err = console("p1", bearerOf(u2))
	assert.ErrorIs(t, err, principal.ErrInvalidToken, "a token of the earlier membership")
	assert.Equal(t, msgConsoleOldGrant, principal.Message(err, ""))
	// An entry written without members (an older control plane) honours no token.
	require.NoError(t, f.m.PutProject(ctx, mirror.Project{ID: "p1", AccountID: "a1", Version: 1}))
	require.Eventually(t, func() bool {
		_, err := console("p1", bearerOf(token("p1", f.consolePriv)))
		return errors.Is(err, principal.ErrNotFound)
	}, 5*time.Second, time.Millisecond, "a project entry without members honours tokens")
	require.NoError(t, f.m.PutProject(ctx, mirror.Project{ID: "p1", AccountID: "a1", Version: 1, Members: map[string]int64{"u1": 1000}}))
	require.Eventually(t, func() bool {
		_, err := console("p1", bearerOf(token("p1", f.consolePriv)))
		return err == nil
	}, 5*time.Second, time.Millisecond)

	// A console token lives up to an hour; deleting its project ends it at once, answered
	// like a project that never existed.
	tok := token("p1", f.consolePriv)
	require.NoError(t, f.m.DeleteProject(context.Background(), "p1"))
	require.Eventually(t, func() bool {
		_, err := console("p1", map[string][]string{"Authorization": {"Bearer " + tok}})
		return errors.Is(err, principal.ErrNotFound)
	}, 5*time.Second, 10*time.Millisecond, "a token of a deleted project still opens it")
	_, err = console("p9", map[string][]string{"Authorization": {"Bearer " + token("p9", f.consolePriv)}})
	assert.ErrorIs(t, err, principal.ErrNotFound, "a token of a project the mirror never had")
	assert.Equal(t, msgConsoleNoProject, principal.Message(err, ""))
}

// Replay changes a project's data: only a console token of its owner or an admin, by the
// role the mirror holds now. Whatever would not even read is refused as a read is.
func TestConsoleWriteNeedsOwnerOrAdminToken(t *testing.T) {
	a, f := startWith(t, nil)
	ctx := context.Background()
	require.NoError(t, f.m.PutProject(ctx, mirror.Project{ID: "p1", AccountID: "a1", Version: 2,
		Members: map[string]int64{"u1": 1000, "u2": 2000, "u3": 3000, "u4": 4000},
		Roles:   map[string]string{"u1": "owner", "u2": "admin", "u3": "member", "u4": "viewer"}}))
	require.Eventually(t, func() bool { p, _ := a.cache.Project("p1"); return p.Version == 2 }, 5*time.Second, 10*time.Millisecond)
	bearerOf := func(user string, grant int64, project string) map[string][]string {
		tok, err := consoletoken.Issue(f.consolePriv, consoletoken.Claims{UserID: user, ProjectID: project, Grant: grant}, time.Minute, time.Now())
		require.NoError(t, err)
		return map[string][]string{"Authorization": {"Bearer " + tok}}
	}
	write := func(project string, h map[string][]string) (principal.Principal, error) {
		ctx, err := a.AuthorizeConsoleWrite(context.Background(), h, project)
		p, _ := principal.FromContext(ctx)
		return p, err
	}
	p, err := write("p1", bearerOf("u1", 1000, "p1"))
	require.NoError(t, err, "owner")
	assert.Equal(t, principal.Principal{ProjectID: "p1", Scope: principal.ScopeConsole, KeyID: "user:u1"}, p)
	_, err = write("p1", bearerOf("u2", 2000, "p1"))
	require.NoError(t, err, "admin")

	// A token that names its user's email: the principal carries it, so actions are
	// recorded by who people know; roles are still the user id's.
	withEmail := func(user string, grant int64, email string) map[string][]string {
		tok, err := consoletoken.Issue(f.consolePriv, consoletoken.Claims{UserID: user, ProjectID: "p1", Grant: grant, Email: email}, time.Minute, time.Now())
		require.NoError(t, err)
		return map[string][]string{"Authorization": {"Bearer " + tok}}
	}
	p, err = write("p1", withEmail("u1", 1000, "ana@example.com"))
	require.NoError(t, err, "owner with email")
	assert.Equal(t, principal.Principal{ProjectID: "p1", Scope: principal.ScopeConsole, KeyID: "user:u1", Email: "ana@example.com"}, p)
	_, err = write("p1", withEmail("u3", 3000, "u1@example.com"))
	require.ErrorIs(t, err, ErrForbidden, "the email names, the user id decides: a member is still a member")

	for name, c := range map[string]struct {
		project string
		headers map[string][]string
		want    error
		msg     string
	}{
		"member":             {"p1", bearerOf("u3", 3000, "p1"), ErrForbidden, msgWriteNeedsRole},
		"viewer":             {"p1", bearerOf("u4", 4000, "p1"), ErrForbidden, msgWriteNeedsRole},
		"API key":            {"p1", map[string][]string{"X-Api-Key": {f.project}}, ErrForbidden, msgWriteNeedsToken},
		"API key as Bearer":  {"p1", map[string][]string{"Authorization": {"Bearer " + f.project}}, ErrForbidden, msgWriteNeedsToken},
		"owner's token, B":   {"p2", bearerOf("u1", 1000, "p1"), principal.ErrNotFound, msgConsoleNoProject},
		"A's key for B":      {"p2", map[string][]string{"X-Api-Key": {f.project}}, principal.ErrNotFound, msgConsoleNoProject},
		"nothing":            {"p1", map[string][]string{}, principal.ErrMissingKey, msgConsoleMissing},
		"B's owner token, A": {"p1", bearerOf("u1", 1000, "p2"), principal.ErrNotFound, msgConsoleNoProject},
	} {
		_, err := write(c.project, c.headers)
		require.ErrorIs(t, err, c.want, name)
		assert.Equal(t, c.msg, principal.Message(err, ""), name)
		var f interface{ Forbidden() bool }
		assert.Equal(t, c.want == ErrForbidden, errors.As(err, &f), "%s: recognised by its Forbidden method", name)
	}

	// An admin demoted to member loses replay at once, with the token they hold.
	require.NoError(t, f.m.PutProject(ctx, mirror.Project{ID: "p1", AccountID: "a1", Version: 3,
		Members: map[string]int64{"u1": 1000, "u2": 2000}, Roles: map[string]string{"u1": "owner", "u2": "member"}}))
	require.Eventually(t, func() bool {
		_, err := write("p1", bearerOf("u2", 2000, "p1"))
		return errors.Is(err, ErrForbidden)
	}, 5*time.Second, 10*time.Millisecond, "a demoted admin still replays")
}
