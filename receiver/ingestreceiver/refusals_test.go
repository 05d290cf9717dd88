package ingestreceiver

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"

	"github.com/otelcol-svc/otelcol-svc/exporter/jetstreamexporter"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/usage"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// ownAccountAuth is fakeAuth whose keys name an account, as the projectauth extension's
// do: key-<project> belongs to account acct-<project>.
type ownAccountAuth struct{ *fakeAuth }

func (a ownAccountAuth) Authenticate(ctx context.Context, headers map[string][]string) (context.Context, error) {
	key := http.Header(headers).Get("X-Api-Key")
	if !strings.HasPrefix(key, "key-") {
		return ctx, principal.ErrInvalidKey
	}
	p := strings.TrimPrefix(key, "key-")
	return principal.NewContext(ctx, principal.Principal{ProjectID: p, AccountID: "acct-" + p}), nil
}

// What this receiver refuses for an account's limits is counted in
// the account's usage, by reason, records where the request's count is known (an OTLP
// request over max_records_per_request), 1 where its body was never parsed; bad input and
// the receiver's own capacity are not the account's limits and are not counted; another
// account's usage shows none of it.
func TestReceiverRefusalsAreCounted(t *testing.T) {
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	ctx := context.Background()
	// The meter creates the usage bucket (the receiver only binds to it).
	rd, err := usage.OpenReader(ctx, js, 0, 1)
	require.NoError(t, err)
	tr := startTestReceiver(t, func(c *Config) {
		c.MaxRequestBodySize = 4096
		c.MaxRecordsPerRequest = 5
		c.MaxInflightBytesPerAccount = 64 << 10
	}, &fakeAuth{js: js})
	auth := ownAccountAuth{&fakeAuth{js: js}}
	tr.auth, tr.dp = auth, auth
	tr.startRefusals(js)
	t.Cleanup(func() {
		tr.stopRefusals()
		tr.wg.Wait()
	})
	// As confighttp serves it: bodies past max_request_body_size end in a MaxBytesError.
	srv := httptest.NewServer(http.MaxBytesHandler(tr.routes(), 4096))
	t.Cleanup(srv.Close)
	tr.url = srv.URL
	key := map[string]string{"X-API-Key": "key-p1"}

	// A body over max_request_body_size: never parsed, one.
	a := do(t, http.MethodPost, tr.url+"/v1/events/batch", []byte(`[`+strings.Repeat(`{"a":1},`, 1000)+`{}]`), key)
	require.Equal(t, http.StatusRequestEntityTooLarge, a.status, "%s", a.body)
	// OTLP with 7 records over a limit of 5: the 7 are known.
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for range 7 {
		lrs.AppendEmpty().Body().SetStr("x")
	}
	body, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	require.NoError(t, err)
	a = do(t, http.MethodPost, tr.url+"/v1/logs", body, map[string]string{"X-API-Key": "key-p1", "Content-Type": "application/x-protobuf"})
	require.Equal(t, http.StatusRequestEntityTooLarge, a.status, "%s", a.body)
	// The account's share of the bytes read at once is held by its other requests.
	held := tr.admit.ticket("account:acct-p1")
	require.NoError(t, held.reading(64<<10))
	a = do(t, http.MethodPost, tr.url+"/v1/events", []byte(`{"a":1}`), key)
	require.Equal(t, http.StatusServiceUnavailable, a.status, "%s", a.body)
	assert.Equal(t, apierror.Unavailable, a.code(t))
	held.release()
	// Not the account's limits: invalid JSON, and a request that passes.
	a = do(t, http.MethodPost, tr.url+"/v1/events", []byte(`{"a":`), key)
	require.Equal(t, http.StatusBadRequest, a.status)
	a = do(t, http.MethodPost, tr.url+"/v1/events", []byte(`{"a":1}`), key)
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	// Another account's refusal, to be kept apart.
	a = do(t, http.MethodPost, tr.url+"/v1/events", bytes.Repeat([]byte(" "), 5000), map[string]string{"X-API-Key": "key-p2"})
	require.Equal(t, http.StatusRequestEntityTooLarge, a.status)

	want := map[string]int64{usage.ReasonTooLarge: 1 + 7, usage.ReasonLimits: 1}
	var u usage.AccountUsage
	require.Eventually(t, func() bool {
		u, err = rd.Account(ctx, "acct-p1", time.Now())
		require.NoError(t, err)
		return assert.ObjectsAreEqual(want, u.RefusedByReason)
	}, 5*time.Second, 20*time.Millisecond, "refused_by_reason never became %v: %v", want, u.RefusedByReason)
	assert.EqualValues(t, 9, u.Refused)
	assert.Nil(t, u.RefusingSince, "no quota refusal")
	other, err := rd.Account(ctx, "acct-p2", time.Now())
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{usage.ReasonTooLarge: 1}, other.RefusedByReason)
}

// The JetStream exporter's refusals (the month's quota, the project's rate and its burst,
// a record over max_record_bytes) are counted where it decides them, in records, with
// the first quota refusal as refusing_since; an unlimited account's rate refusals make no
// "refusing".
func TestExporterRefusalsAreCounted(t *testing.T) {
	x := startWithExporter(t, func(c *jetstreamexporter.Config) {
		c.Usage.FreeTierEvents = 5
		c.MaxRecordBytes = 1000
	})
	rd, err := usage.OpenReader(context.Background(), x.js, 5, 1)
	require.NoError(t, err)
	key := map[string]string{"X-API-Key": "key-p1"}
	a := do(t, http.MethodPost, x.tr.url+"/v1/events/batch", []byte(`[{},{},{}]`), key)
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	before := time.Now()
	for range 10 { // 2 left: each batch of 3 is refused whole
		a = do(t, http.MethodPost, x.tr.url+"/v1/events/batch", []byte(`[{},{},{}]`), key)
		require.Equal(t, http.StatusTooManyRequests, a.status, "%s", a.body)
	}
	a = do(t, http.MethodPost, x.tr.url+"/v1/events/batch", []byte(`[{"b":"`+strings.Repeat("x", 2000)+`"},{}]`), key)
	require.Equal(t, http.StatusRequestEntityTooLarge, a.status, "%s", a.body)

	want := map[string]int64{usage.ReasonQuota: 30, usage.ReasonTooLarge: 2}
	var u usage.AccountUsage
	require.Eventually(t, func() bool {
		u, err = rd.Account(context.Background(), "acct", time.Now())
		require.NoError(t, err)
		return assert.ObjectsAreEqual(want, u.RefusedByReason)
	}, 5*time.Second, 20*time.Millisecond, "refused_by_reason never became %v: %v", want, u.RefusedByReason)
	assert.EqualValues(t, 3, u.Events)
	require.NotNil(t, u.RefusingSince, "2 of 5 left, and refused just now: refusing")
	assert.WithinDuration(t, before, *u.RefusingSince, 2*time.Second)

	r := startWithExporter(t, func(c *jetstreamexporter.Config) {
		c.Usage.FreeTierEvents = 0
		c.Usage.RateLimit.PerSecond, c.Usage.RateLimit.Burst = 0.001, 3
	})
	rd, err = usage.OpenReader(context.Background(), r.js, 0, 1)
	require.NoError(t, err)
	a = do(t, http.MethodPost, r.tr.url+"/v1/events/batch", []byte(`[{},{},{}]`), key)
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	a = do(t, http.MethodPost, r.tr.url+"/v1/events/batch", []byte(`[{},{}]`), key)
	require.Equal(t, http.StatusTooManyRequests, a.status, "%s", a.body)
	a = do(t, http.MethodPost, r.tr.url+"/v1/events/batch", []byte(`[{},{},{},{}]`), key)
	require.Equal(t, http.StatusRequestEntityTooLarge, a.status, "over the burst: %s", a.body)
	want = map[string]int64{usage.ReasonRate: 2, usage.ReasonTooLarge: 4}
	require.Eventually(t, func() bool {
		u, err = rd.Account(context.Background(), "acct", time.Now())
		require.NoError(t, err)
		return assert.ObjectsAreEqual(want, u.RefusedByReason)
	}, 5*time.Second, 20*time.Millisecond, "refused_by_reason never became %v: %v", want, u.RefusedByReason)
	assert.Nil(t, u.RefusingSince)
}
