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
// not from a login page without its button and a line in the log.
func TestAWrongSingleSignOnSettingStopsTheStart(t *testing.T) {
	n := testenv.StartNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testenv.BuildPackage(t, "./controlplane"))
	cmd.Env = append(os.Environ(), "NATS_URL="+n.URL(), "SVC_JWT_SECRET="+testJWTSecret, "SVC_DATA_DIR="+t.TempDir(),
		"SVC_CONTROLPLANE_LISTEN=127.0.0.1:0", "SVC_OIDC_ISSUER=https://login.example.com", "SVC_OIDC_CLIENT_SECRET=s3cret-value")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	assert.Contains(t, string(out), "SVC_OIDC_ISSUER needs SVC_OIDC_CLIENT_ID and SVC_OIDC_CLIENT_SECRET")
	assert.NotContains(t, string(out), "s3cret-value")
}
