package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// The stock batch processor between the ingest receiver and the jetstream exporter would
// answer 2xx before anything is stored and lose the request's project on the way, so the
// distribution refuses such a configuration: `validate` fails naming the reason, and so
// does a start. The configuration is the shipped receiver role with only batch added, so
// the shipped one validating proves batch is what is refused.
func TestBatchBeforeJetStreamRefusedByValidate(t *testing.T) {
	bin := testenv.Binary(t)
	shipped, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "configs", "receiver.yaml"))
	require.NoError(t, err)
	withBatch := strings.Replace(string(shipped), "\nprocessors:\n", "\nprocessors:\n  batch:\n", 1)
	withBatch = strings.ReplaceAll(withBatch, "processors: [memory_limiter]", "processors: [memory_limiter, batch]")
	require.Equal(t, 3, strings.Count(withBatch, "[memory_limiter, batch]"), "configs/receiver.yaml changed shape: update this test")
	batchCfg := filepath.Join(t.TempDir(), "receiver-batch.yaml")
	require.NoError(t, os.WriteFile(batchCfg, []byte(withBatch), 0o600))

	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		// validate does not connect anywhere; the address only has to be well formed.
		cmd.Env = append(os.Environ(), "NATS_URL=nats://127.0.0.1:1", "SVC_RECEIVER_LISTEN=127.0.0.1:0",
			"SVC_OTLP_GRPC_LISTEN=127.0.0.1:0", "SVC_HEALTH_LISTEN=127.0.0.1:0", "SVC_METRICS_PORT=0")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	out, err := run("validate", "--config", filepath.Join(testenv.RepoRoot(), "configs", "receiver.yaml"))
	require.NoError(t, err, "the shipped receiver config must validate:\n%s", out)

	for _, args := range [][]string{{"validate", "--config", batchCfg}, {"--config", batchCfg}} {
		out, err := run(args...)
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "%v must fail:\n%s", args, out)
		require.NotZero(t, exit.ExitCode())
		require.Contains(t, out, `processor "batch" cannot sit before the "jetstream" exporter`, "%v", args)
		require.Contains(t, out, "a 2xx means stored", "%v", args)
		for _, p := range []string{"logs/ingest", "traces/ingest", "metrics/ingest"} {
			require.Contains(t, out, `pipeline "`+p+`"`, "%v", args)
		}
	}
}
