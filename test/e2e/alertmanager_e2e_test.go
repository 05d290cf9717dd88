package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/sourceverify"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// The real sender of the alertmanager preset: Alertmanager v0.27.0 (`make alertmanager`
// builds it into bin/), posting its webhook notifications with basic auth to a push
// source's ingest URL.

// alertmanagerBinary is bin/alertmanager, else alertmanager on PATH. Without it the test
// is skipped, except under CI=true, where `make test` has built it.
func alertmanagerBinary(t *testing.T) string {
	t.Helper()
	if p := filepath.Join(testenv.RepoRoot(), "bin", "alertmanager"); isExecutable(p) {
		return p
	}
	if p, err := exec.LookPath("alertmanager"); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("alertmanager is needed (CI=true: not skipped); `make alertmanager` builds it into bin/")
	}
	t.Skip("alertmanager not in bin/ or PATH; `make alertmanager` builds it")
	return ""
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

type alertmanager struct {
	URL string // http://127.0.0.1:PORT
	log *amLog
}

type amLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *amLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *amLog) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// alertmanagerConfig routes every alert to one webhook receiver. The intervals are small so
// that a notification's repeat (repeat_interval) happens within the test; group_wait is
// irrelevant here since the alerts start in the past, which Alertmanager flushes at once.
func alertmanagerConfig(url, username, password string) string {
	return fmt.Sprintf(`route:
  receiver: ingest
  group_by: [alertname]
  group_wait: 0s
  group_interval: 500ms
  repeat_interval: 1s
receivers:
  - name: ingest
    webhook_configs:
      - url: %q
        http_config:
          basic_auth:
            username: %q
            password: %q
`, url, username, password)
}

// startAlertmanager runs Alertmanager on free loopback ports with clustering off (no gossip
// port) and its state in a temp dir, and waits until it is ready.
func startAlertmanager(t *testing.T, bin, config string) *alertmanager {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "alertmanager.yml")
	require.NoError(t, os.WriteFile(cfg, []byte(config), 0o600))
	am := &alertmanager{log: &amLog{}}
	for attempt := 0; ; attempt++ {
		addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
		am.URL = "http://" + addr
		cmd := exec.Command(bin,
			"--config.file="+cfg,
			"--storage.path="+filepath.Join(dir, "data"),
			"--web.listen-address="+addr,
			"--cluster.listen-address=",
			"--log.level=debug",
		)
		cmd.Stdout, cmd.Stderr = am.log, am.log
		require.NoError(t, cmd.Start())
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		stop := func() {
			_ = cmd.Process.Kill()
			<-exited
		}
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) {
			select {
			case <-exited:
				deadline = time.Time{}
				continue
			default:
			}
			if r, err := http.Get(am.URL + "/-/ready"); err == nil {
				r.Body.Close()
				if r.StatusCode == http.StatusOK {
					t.Cleanup(func() {
						stop()
						if t.Failed() {
							t.Logf("alertmanager log:\n%s", am.log.String())
						}
					})
					return am
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		stop()
		// A port taken between FreePort and the bind is worth another try; anything else is not.
		if attempt < 2 && strings.Contains(am.log.String(), "address already in use") {
			am.log = &amLog{}
			continue
		}
		t.Fatalf("alertmanager did not become ready:\n%s", am.log.String())
	}
}

type amAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations,omitempty"`
	StartsAt    time.Time         `json:"startsAt"`
	EndsAt      *time.Time        `json:"endsAt,omitempty"`
}

// postAlerts sends alerts as Prometheus does, through Alertmanager's API.
func (am *alertmanager) postAlerts(t *testing.T, alerts ...amAlert) {
	t.Helper()
	b, err := json.Marshal(alerts)
	require.NoError(t, err)
	r, err := http.Post(am.URL+"/api/v2/alerts", "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	body, _ := io.ReadAll(r.Body)
	r.Body.Close()
	require.Equal(t, http.StatusOK, r.StatusCode, "%s", body)
}

// metric is the sum of Alertmanager's samples of name whose labels include integration="webhook".
func (am *alertmanager) metric(t *testing.T, name string) float64 {
	t.Helper()
	r, err := http.Get(am.URL + "/metrics")
	require.NoError(t, err)
	defer r.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(r.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") || !strings.Contains(line, `integration="webhook"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		require.NoError(t, err, line)
		sum += v
	}
	require.NoError(t, sc.Err())
	return sum
}

// Alertmanager counts a webhook request in alertmanager_notification_requests_total once it
// has its answer (alertmanager_notifications_total counts before sending), so after it has
// gone up the request's records, if any, are stored.
const (
	amRequests       = "alertmanager_notification_requests_total"
	amRequestsFailed = "alertmanager_notification_requests_failed_total"
	amFailed         = "alertmanager_notifications_failed_total"
)

// waitRequests waits until Alertmanager has had the answers to n more webhook requests than
// it had when from was read.
func (am *alertmanager) waitRequests(t *testing.T, from float64, n int, why string) {
	t.Helper()
	require.Eventually(t, func() bool { return am.metric(t, amRequests) >= from+float64(n) }, 20*time.Second, 20*time.Millisecond,
		"alertmanager sent no %s", why)
}

func TestAlertmanagerPushSource(t *testing.T) {
	bin := alertmanagerBinary(t)
	e := startReceiver(t, nil)
	e.project(t, "amproj")

	const username, password = "am", "am-password-0123456789abcdef"
	verification := sourceverify.Config{Scheme: sourceverify.SchemeBasic, Username: username, Password: password}
	require.NoError(t, verification.Validate())
	storedForm := verification.Stored()
	require.NotEqual(t, password, storedForm.Password, "the mirror holds the password's hash only")
	src := mirror.Source{
		ID: "src_am", ProjectID: "amproj", Name: "alertmanager", Connector: "webhook",
		Preset: "alertmanager", Verification: &storedForm,
	}
	ingestKey := newIngestKey()
	require.NoError(t, e.m.PutSource(context.Background(), ingestKey, src))
	url := e.col.HTTP + "/ingest/" + ingestKey
	// The source is known once a request with its credentials and an empty notification is
	// answered 400 (no alerts, nothing stored) instead of 404.
	auth := map[string]string{"Authorization": "Basic " + basicAuth(username, password)}
	var last atomic.Value
	known := assert.Eventually(t, func() bool {
		r := post(t, url, "", "application/json", []byte(`{}`), auth)
		last.Store(fmt.Sprintf("%d %s", r.StatusCode, r.Body))
		return r.StatusCode == http.StatusBadRequest
	}, 10*time.Second, 20*time.Millisecond)
	require.True(t, known, "source never known to the receiver as an alertmanager source with basic auth; last answer: %v", last.Load())

	am := startAlertmanager(t, bin, alertmanagerConfig(url, username, password))
	startsAt := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	disk := amAlert{
		Labels:      map[string]string{"alertname": "DiskFull", "instance": "a-1", "severity": "page"},
		Annotations: map[string]string{"summary": "disk full on a-1"},
		StartsAt:    startsAt,
	}
	other := amAlert{
		Labels:      map[string]string{"alertname": "DiskFull", "instance": "b-1", "severity": "page"},
		Annotations: map[string]string{"summary": "disk full on b-1"},
		StartsAt:    startsAt,
	}
	records := func() []*rawRecord { return rawRecords(t, e, "amproj") }

	am.postAlerts(t, disk, other)
	require.Eventually(t, func() bool { return len(records()) >= 2 }, 20*time.Second, 20*time.Millisecond,
		"the two firing alerts were not stored")
	// Its repeat of the same notification (repeat_interval) is the same alerts again: stored once.
	am.waitRequests(t, am.metric(t, amRequests), 2, "repeat of the firing notification")
	require.Len(t, records(), 2, "a repeated notification stores nothing new")

	endsAt := time.Now().Add(-time.Second).UTC().Truncate(time.Second)
	resolved := disk
	resolved.EndsAt = &endsAt
	am.postAlerts(t, resolved)
	require.Eventually(t, func() bool { return len(records()) >= 3 }, 20*time.Second, 20*time.Millisecond,
		"the resolve was not stored")
	// The resolve's notification carried b-1 again, still firing, and Alertmanager repeats
	// the group with b-1 alone: neither stores another record.
	am.waitRequests(t, am.metric(t, amRequests), 2, "repeat after the resolve")

	got := records()
	require.Len(t, got, 3, "two firing, one resolved; repeats and the firing alert re-sent with the resolve are stored once")
	want := []struct {
		typ, instance string
		ts            time.Time
	}{
		{"alert.firing", "a-1", startsAt},
		{"alert.firing", "b-1", startsAt},
		{"alert.resolved", "a-1", endsAt},
	}
	for i, r := range got {
		assert.Equal(t, want[i].typ, r.EventType, "record %d", i)
		assert.Equal(t, want[i].instance, r.Labels["instance"], "record %d: %v", i, r.Labels)
		assert.Equal(t, "DiskFull", r.Labels["alertname"], "record %d", i)
		assert.Equal(t, "disk full on "+want[i].instance, r.Text, "record %d", i)
		ts, err := time.Parse(time.RFC3339Nano, r.Timestamp)
		if assert.NoError(t, err, "record %d", i) {
			assert.True(t, want[i].ts.Equal(ts), "record %d: time %s, want %s", i, r.Timestamp, want[i].ts)
		}
		assert.Equal(t, src.ID, r.SourceID, "record %d", i)
		var payload struct {
			Status string `json:"status"`
			Group  struct {
				Receiver string `json:"receiver"`
				GroupKey string `json:"groupKey"`
			} `json:"group"`
		}
		require.NoError(t, json.Unmarshal(r.Payload, &payload), "%s", r.Payload)
		assert.Equal(t, strings.TrimPrefix(want[i].typ, "alert."), payload.Status, "record %d: the alert as Alertmanager sent it", i)
		assert.Equal(t, "ingest", payload.Group.Receiver, "record %d: the notification's fields are kept", i)
		assert.NotEmpty(t, payload.Group.GroupKey, "record %d", i)
	}
	assert.Equal(t, 0.0, am.metric(t, amFailed), "no notification failed")

	// An Alertmanager with the wrong password is refused: its notification fails, nothing stored.
	wrong := startAlertmanager(t, bin, alertmanagerConfig(url, username, password+"x"))
	wrong.postAlerts(t, amAlert{Labels: map[string]string{"alertname": "WrongPassword", "instance": "c-1"}, StartsAt: startsAt})
	require.Eventually(t, func() bool { return wrong.metric(t, amFailed) >= 1 && wrong.metric(t, amRequestsFailed) >= 1 },
		20*time.Second, 20*time.Millisecond, "the wrong password's notification did not fail")
	assert.Contains(t, wrong.log.String(), "unexpected status code 401", "refused as unauthorized")
	assert.Contains(t, wrong.log.String(), "signature_invalid", "the refusal's code, which Alertmanager logs")
	assert.Len(t, records(), 3, "a refused notification stores nothing")
	assert.NotContains(t, e.col.Log(), password, "the password is never logged")
}

type rawRecord struct {
	envelopeRecord
	SourceID string
}

func rawRecords(t *testing.T, e *env, project string) []*rawRecord {
	t.Helper()
	var out []*rawRecord
	for _, m := range stored(t, e.js, project) {
		r := &rawRecord{SourceID: m.Header.Get(streams.HeaderSourceID)}
		require.NoError(t, json.Unmarshal(m.Data, &r.envelopeRecord), "%s", m.Data)
		out = append(out, r)
	}
	return out
}

func basicAuth(username, password string) string {
	return base64.StdEncoding.EncodeToString([]byte(username + ":" + password))
}

// What the receiver's alertmanager preset and basic verification rely on, seen at a plain
// HTTP server: Alertmanager sends the configured credentials as a Basic Authorization
// header and a notification with groupKey and each alert's fingerprint.
func TestAlertmanagerWebhookAsSent(t *testing.T) {
	bin := alertmanagerBinary(t)
	type req struct {
		header http.Header
		body   []byte
	}
	got := make(chan req, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- req{r.Header.Clone(), b}
	}))
	defer srv.Close()
	am := startAlertmanager(t, bin, alertmanagerConfig(srv.URL+"/ingest/in_x", "am", "pw-0123456789"))
	am.postAlerts(t, amAlert{Labels: map[string]string{"alertname": "A", "instance": "a-1"}, StartsAt: time.Now().Add(-time.Minute)})
	var r req
	select {
	case r = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("no webhook")
	}
	assert.Equal(t, "Basic "+basicAuth("am", "pw-0123456789"), r.header.Get("Authorization"))
	var n struct {
		GroupKey string `json:"groupKey"`
		Status   string `json:"status"`
		Alerts   []struct {
			Status      string            `json:"status"`
			Fingerprint string            `json:"fingerprint"`
			Labels      map[string]string `json:"labels"`
		} `json:"alerts"`
	}
	require.NoError(t, json.Unmarshal(r.body, &n), "%s", r.body)
	assert.NotEmpty(t, n.GroupKey)
	require.Len(t, n.Alerts, 1)
	assert.Equal(t, "firing", n.Alerts[0].Status)
	assert.NotEmpty(t, n.Alerts[0].Fingerprint)
}
