package projectauthextension

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/sourceverify"
)

// The mirror reaches the cache within this; polled at pollMirror.
const (
	waitMirror = 5 * time.Second
	pollMirror = 5 * time.Millisecond
)

// A source with a verification is let through without header credentials, carrying its
// verification for the receiver to check against the body; the source's own ingest key
// still opens it, with nothing left to verify.
func TestPushIngestWithVerification(t *testing.T) {
	for _, off := range []bool{false, true} {
		a, f := startWith(t, func(c *Config) {
			if off {
				c.PushIngest.Auth = "off"
			}
		})
		ver := sourceverify.Config{Scheme: sourceverify.SchemeGitHub, Secret: "it's a secret to everybody"}
		require.NoError(t, f.m.PutSource(context.Background(), "in_gh", mirror.Source{ID: "s9", ProjectID: "p1", Name: "gh", Preset: "github", Verification: &ver}))
		// The service token (unset here) and a project key: neither opens the source, the
		// signature decides.
		for name, h := range map[string]map[string][]string{
			"no credentials":         {},
			"project key":            {"Authorization": {"Bearer " + f.project}},
			"another source's key":   {"Authorization": {"Bearer " + f.other}},
			"service token unset":    {"X-Service-Token": {"0123456789abcdef0123"}},
			"basic credentials sent": {"Authorization": {"Basic YW06c2VjcmV0"}},
		} {
			var src mirror.Source
			require.Eventually(t, func() bool {
				var err error
				_, src, err = a.AuthenticateIngest(context.Background(), h, "in_gh")
				return err == nil
			}, waitMirror, pollMirror, "off=%v %s", off, name)
			ctx, src, err := a.AuthenticateIngest(context.Background(), h, "in_gh")
			require.NoError(t, err)
			require.NotNil(t, src.Verification, "off=%v %s: the receiver must verify", off, name)
			assert.Equal(t, ver, *src.Verification)
			assert.Equal(t, "github", src.Preset)
			p, ok := principal.FromContext(ctx)
			require.True(t, ok)
			assert.Equal(t, principal.Principal{ProjectID: "p1", AccountID: "a1", Scope: mirror.ScopeIngest, SourceID: "s9"}, p)
		}
		// An unknown ingest URL is still 404.
		_, _, err := a.AuthenticateIngest(context.Background(), map[string][]string{}, "in_nope")
		assert.ErrorIs(t, err, principal.ErrNotFound)
		// A source without a verification still needs its key.
		_, _, err = a.AuthenticateIngest(context.Background(), map[string][]string{}, "in_one")
		if off {
			assert.NoError(t, err)
		} else {
			assert.ErrorIs(t, err, principal.ErrMissingKey)
		}
	}
}

func TestPushIngestVerificationWithIngestKey(t *testing.T) {
	a, f := startWith(t, nil)
	ver := sourceverify.Config{Scheme: sourceverify.SchemeGitHub, Secret: "it's a secret to everybody"}
	require.NoError(t, f.m.PutSource(context.Background(), "in_one", mirror.Source{ID: "s1", ProjectID: "p1", Name: "github", Verification: &ver}))
	require.Eventually(t, func() bool {
		_, src, err := a.AuthenticateIngest(context.Background(), map[string][]string{}, "in_one")
		return err == nil && src.Verification != nil
	}, waitMirror, pollMirror)
	ctx, src, err := a.AuthenticateIngest(context.Background(), map[string][]string{"Authorization": {"Bearer " + f.ingest}}, "in_one")
	require.NoError(t, err)
	assert.Nil(t, src.Verification, "the source's own key authenticated the request: nothing left to verify")
	p, _ := principal.FromContext(ctx)
	assert.Equal(t, "k2", p.KeyID)
}
