package sourceverify

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var installSigners sync.Once

// signWithNode signs requests with the senders' own npm libraries, pinned in
// testdata/signers (sign.mjs: @octokit/webhooks-methods for GitHub, standardwebhooks for
// Standard Webhooks), and returns the headers each would send. Without node or the
// installed packages the test is skipped, except under CI=true, where it fails.
func signWithNode(t *testing.T, reqs ...map[string]any) []http.Header {
	t.Helper()
	dir := filepath.Join("testdata", "signers")
	if os.Getenv("CI") == "true" {
		// The Makefile installs the locked packages before the tests; a CI that ran the
		// tests some other way still checks the signatures rather than failing on setup.
		installSigners.Do(func() {
			if _, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); err == nil {
				return
			}
			if npm, err := exec.LookPath("npm"); err == nil {
				cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts")
				cmd.Dir = dir
				out, err := cmd.CombinedOutput()
				t.Logf("npm ci in %s: %v\n%s", dir, err, out)
			}
		})
	}
	var missing []string
	node, err := exec.LookPath("node")
	if err != nil {
		missing = append(missing, "node")
	}
	for _, pkg := range []string{"@octokit/webhooks-methods", "standardwebhooks"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg)); err != nil {
			missing = append(missing, "node_modules/"+pkg+" (cd internal/sourceverify/testdata/signers && npm ci)")
		}
	}
	if len(missing) > 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("signing with the senders' libraries needs %v (CI=true: not skipped)", missing)
		}
		t.Skipf("skipping: signing with the senders' libraries needs %v", missing)
	}
	in, err := json.Marshal(reqs)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "sign.mjs")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "node sign.mjs: %s", stderr.String())
	var headers []map[string]string
	require.NoError(t, json.Unmarshal(out, &headers))
	require.Len(t, headers, len(reqs))
	hs := make([]http.Header, len(headers))
	for i, m := range headers {
		hs[i] = http.Header{}
		for k, v := range m {
			hs[i].Set(k, v)
		}
	}
	return hs
}

func TestGitHubSignedByOctokit(t *testing.T) {
	c := Config{Scheme: SchemeGitHub, Secret: NewSecret(SchemeGitHub)}
	body := []byte(`{"action":"opened","issue":{"number":1,"title":"ünïcödé"}}`)
	hs := signWithNode(t, map[string]any{"scheme": "github", "secret": c.Secret, "body": string(body)})

	require.NoError(t, Verify(c, hs[0], "", body, time.Now()))
	requireReason(t, ReasonMismatch, Verify(c, hs[0], "", flipByte(body), time.Now()))
	other := Config{Scheme: SchemeGitHub, Secret: NewSecret(SchemeGitHub)}
	requireReason(t, ReasonMismatch, Verify(other, hs[0], "", body, time.Now()))
}

func TestStandardWebhooksSignedByTheLibrary(t *testing.T) {
	c := Config{Scheme: SchemeStandardWebhooks, Secret: NewSecret(SchemeStandardWebhooks)}
	old := NewSecret(SchemeStandardWebhooks)
	body := []byte(`{"type":"invoice.paid","data":{"id":"inv_1"}}`)
	now := time.Unix(1_790_000_000, 0)
	hs := signWithNode(t,
		map[string]any{"scheme": "standard_webhooks", "secret": c.Secret, "id": "msg_1", "timestamp": now.Unix(), "body": string(body)},
		map[string]any{"scheme": "standard_webhooks", "secret": old, "id": "msg_1", "timestamp": now.Unix(), "body": string(body)},
		map[string]any{"scheme": "standard_webhooks", "secret": c.Secret, "id": "msg_2", "timestamp": now.Unix() - 412, "body": string(body)},
	)
	require.NoError(t, Verify(c, hs[0], "", body, now.Add(time.Minute)))
	requireReason(t, ReasonMismatch, Verify(c, hs[0], "", flipByte(body), now))
	requireReason(t, ReasonMismatch, Verify(c, hs[1], "", body, now))

	// Rotation: the sender signs with the old and the new secret during the switch.
	rotated := hs[1].Clone()
	rotated.Set("webhook-signature", hs[1].Get("webhook-signature")+" "+hs[0].Get("webhook-signature"))
	require.NoError(t, Verify(c, rotated, "", body, now))

	err := Verify(c, hs[2], "", body, now)
	requireReason(t, ReasonStale, err)
	require.Equal(t, "webhook-timestamp is 412 s old, outside the 300 s tolerance: a replayed or long-delayed call", err.Error())
}
