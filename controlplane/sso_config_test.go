package main

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// An operator who set SVC_OIDC_* wrong finds out at start, as with a wrong SMTP URL,
// not from a login page without its button and a line in the log. An issuer over plain
// HTTP (not on loopback) is wrong: whoever is on the path could swap its signing keys and
// log in as anyone, and would read the client secret.
func TestAWrongSingleSignOnSettingStopsTheStart(t *testing.T) {
	n := testenv.StartNATS(t)
	bin := testenv.BuildPackage(t, "./controlplane")
	for _, tc := range []struct {
		env  []string
		says string
	}{
		{[]string{"SVC_OIDC_ISSUER=https://login.example.com", "SVC_OIDC_CLIENT_SECRET=s3cret-value"},
			"SVC_OIDC_ISSUER needs SVC_OIDC_CLIENT_ID and SVC_OIDC_CLIENT_SECRET"},
		{[]string{"SVC_OIDC_ISSUER=http://login.example.com", "SVC_OIDC_CLIENT_ID=cp", "SVC_OIDC_CLIENT_SECRET=s3cret-value"},
			"SVC_OIDC_ISSUER must be an https:// URL"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, bin)
		cmd.Env = append(append(os.Environ(), "NATS_URL="+n.URL(), "SVC_JWT_SECRET="+testJWTSecret, "SVC_DATA_DIR="+t.TempDir(),
			"SVC_CONTROLPLANE_LISTEN=127.0.0.1:0"), tc.env...)
		out, err := cmd.CombinedOutput()
		cancel()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "%s", out)
		assert.Contains(t, string(out), tc.says)
		assert.NotContains(t, string(out), "s3cret-value")
	}
}
