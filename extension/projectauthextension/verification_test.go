package projectauthextension

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/otelcol-svc/otelcol-svc/extension/projectauthextension/internal/metadatatest"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/sourceverify"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
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

// A request let through for its source's verification is counted once, with the
// receiver's verdict, beside the other push-ingest outcomes.
func TestPushIngestVerificationIsCountedOnce(t *testing.T) {
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	ctx := context.Background()
	m, err := mirror.Open(ctx, js, 1)
	require.NoError(t, err)
	ver := sourceverify.Config{Scheme: sourceverify.SchemeGitHub, Secret: "it's a secret to everybody"}
	require.NoError(t, m.PutProject(ctx, mirror.Project{ID: "p1", Version: 1}))
	require.NoError(t, m.PutSource(ctx, "in_gh", mirror.Source{ID: "s9", ProjectID: "p1", Name: "gh", Verification: &ver}))
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tt.Shutdown(ctx) })
	ext, err := NewFactory().Create(ctx, metadatatest.NewSettings(tt), createDefaultConfig())
	require.NoError(t, err)
	require.NoError(t, ext.Start(ctx, mirrorHost(t, n.URL())))
	t.Cleanup(func() { _ = ext.Shutdown(ctx) })
	a := ext.(*authenticator)
	require.Eventually(t, func() bool {
		_, src, err := a.AuthenticateIngest(ctx, map[string][]string{}, "in_gh")
		return err == nil && src.Verification != nil
	}, waitMirror, pollMirror)
	before := func(outcome string) int64 {
		got, err := tt.GetMetric("otelcol_projectauth_requests")
		if err != nil {
			return 0
		}
		for _, dp := range got.Data.(metricdata.Sum[int64]).DataPoints {
			if o, _ := dp.Attributes.Value("outcome"); o.AsString() == outcome {
				return dp.Value
			}
		}
		return 0
	}
	ok0, bad0 := before("ok"), before("signature_invalid")
	_, _, err = a.AuthenticateIngest(ctx, map[string][]string{}, "in_gh")
	require.NoError(t, err)
	assert.Equal(t, ok0, before("ok"), "not counted before the verification is done")
	a.CountIngestVerification(ctx, errors.New("mismatch"))
	a.CountIngestVerification(ctx, nil)
	assert.Equal(t, ok0+1, before("ok"))
	assert.Equal(t, bad0+1, before("signature_invalid"))
}
