package sdk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-svc/otelcol-svc/internal/webhooksig"
	"github.com/otelcol-svc/otelcol-svc/sdk/go/agentsdk"
)

// The contract promises that an agent can verify our calls with the SDKs. This signs
// calls the way the agent exporter does (internal/webhooksig) and has the Go, Python
// and JavaScript SDKs parse each one, as an agent would: all three must accept the
// genuine calls with the same content and refuse the forged ones for the same reason.

const (
	secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	other  = "whsec_c2VjcmV0LW9mLWFub3RoZXItcHJvamVjdA=="
	reqID  = "req_5f0c3b1e9a7d4c2b8e6f1a0d3c5b7e9f"
)

type crossCase struct {
	name    string
	body    string
	header  http.Header
	secret  string // the agent's
	outcome string // the verifier's summary, or "refused: <reason>"
}

func signedHeader(t *testing.T, key, body string, ts time.Time) http.Header {
	t.Helper()
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-Request-Id", reqID)
	if err := webhooksig.SetHeaders(h, key, reqID, ts, []byte(body)); err != nil {
		t.Fatal(err)
	}
	return h
}

func crossCases(t *testing.T) []crossCase {
	now := time.Now()
	batch := `[{"_event_type":"payment.failed","amount":42},{"msg":"café ☕ 日本","n":1.50}]`
	window := `{"trigger":{"level":"error"},"window":[{"level":"info"},{"level":"warn"},{"level":"info"}]}`
	batchOK := `{"request_id": "` + reqID + `", "window": false, "records": 2}`

	rotated := signedHeader(t, secret, batch, now)
	oldSig, _ := webhooksig.Sign(other, reqID, now, []byte(batch))
	rotated.Set(webhooksig.HeaderSignature, oldSig+" "+rotated.Get(webhooksig.HeaderSignature))
	unsigned := signedHeader(t, secret, batch, now)
	unsigned.Del(webhooksig.HeaderSignature)
	changedID := signedHeader(t, secret, batch, now)
	changedID.Set(webhooksig.HeaderID, "req_other")

	return []crossCase{
		{"batch", batch, signedHeader(t, secret, batch, now), secret, batchOK},
		{"window", window, signedHeader(t, secret, window, now), secret, `{"request_id": "` + reqID + `", "window": true, "records": 3}`},
		{"secret without prefix", batch, signedHeader(t, secret, batch, now), strings.TrimPrefix(secret, "whsec_"), batchOK},
		{"rotated secrets", batch, rotated, secret, batchOK},
		{"tampered body", strings.Replace(batch, "42", "4200", 1), signedHeader(t, secret, batch, now), secret, "refused: no_matching_signature"},
		{"other project's secret", batch, signedHeader(t, other, batch, now), secret, "refused: no_matching_signature"},
		{"webhook-id changed", batch, changedID, secret, "refused: no_matching_signature"},
		{"replayed after 10 minutes", batch, signedHeader(t, secret, batch, now.Add(-10*time.Minute)), secret, "refused: timestamp_too_old"},
		{"unsigned", batch, unsigned, secret, "refused: missing_header"},
	}
}

// goOutcome is what agentsdk makes of the call, in the scripts' terms.
func goOutcome(t *testing.T, c crossCase) string {
	r := httptest.NewRequest(http.MethodPost, "/agent", strings.NewReader(c.body))
	r.Header = c.header.Clone()
	call, err := agentsdk.ParseCall(r, c.secret)
	if err != nil {
		reasons := map[error]string{
			webhooksig.ErrNoMatchingSig:    "no_matching_signature",
			webhooksig.ErrTimestampTooOld:  "timestamp_too_old",
			webhooksig.ErrTimestampTooNew:  "timestamp_too_new",
			webhooksig.ErrMissingHeader:    "missing_header",
			webhooksig.ErrInvalidTimestamp: "invalid_timestamp",
		}
		for e, reason := range reasons {
			if errors.Is(err, e) {
				return "refused: " + reason
			}
		}
		t.Fatalf("Go: %v", err)
	}
	n := len(call.Records)
	if call.Windowed() {
		n = len(call.Window)
	}
	return summary(t, call.RequestID, call.Windowed(), n)
}

func summary(t *testing.T, id string, window bool, n int) string {
	b, err := json.Marshal(map[string]any{"request_id": id, "window": window, "records": n})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// normalise re-encodes a summary so that the languages' JSON spacing does not matter.
func normalise(t *testing.T, out string) string {
	out = strings.TrimSpace(out)
	if strings.HasPrefix(out, "refused: ") {
		return out
	}
	var s struct {
		RequestID string `json:"request_id"`
		Window    bool   `json:"window"`
		Records   int    `json:"records"`
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("not a summary: %q", out)
	}
	return summary(t, s.RequestID, s.Window, s.Records)
}

func TestCallsVerifyAlikeInEverySDK(t *testing.T) {
	verifiers := []struct {
		lang string
		argv []string
	}{
		{"Python", []string{need(t, "python3"), "python/tests/verify_cli.py"}},
		{"JavaScript", []string{need(t, "node"), "typescript/testdata/verify-cli.mjs"}},
	}
	for _, c := range crossCases(t) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			want := normalise(t, c.outcome)
			if got := goOutcome(t, c); got != want {
				t.Fatalf("Go: %s, want %s", got, want)
			}
			headers := map[string]string{}
			for k := range c.header {
				headers[k] = c.header.Get(k)
			}
			hj, _ := json.Marshal(headers)
			for _, v := range verifiers {
				got, code := run(t, v.argv, c.secret, string(hj), c.body)
				wantCode := 0
				if strings.HasPrefix(want, "refused: ") {
					wantCode = 1
				}
				if code != wantCode || normalise(t, got) != want {
					t.Errorf("%s: exit %d, %q; want exit %d, %s", v.lang, code, got, wantCode, want)
				}
			}
		})
	}
}

func need(t *testing.T, bin string) string {
	t.Helper()
	p, err := exec.LookPath(bin)
	if err != nil {
		t.Fatalf("%s is not on PATH: the cross-language check of the agent SDKs needs it (CI has python3 3.11 and node 20)", bin)
	}
	return p
}

func run(t *testing.T, argv []string, secret, headers, body string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], append(argv[1:], secret, headers)...)
	cmd.Stdin = strings.NewReader(body)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return stdout.String(), 0
	case errors.As(err, &exit) && exit.ExitCode() == 1 && strings.HasPrefix(stdout.String(), "refused: "):
		return stdout.String(), 1
	}
	t.Fatalf("%s failed: %v\nstdout: %s\nstderr: %s", strings.Join(argv, " "), err, stdout.String(), stderr.String())
	return "", -1
}
