package main

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// refusingStack is a control plane and a receiver (configs/receiver.yaml, its meter
// on) on one NATS, whose owner's account was lowered to a limit of 100 events with
// `accounts set-limit` and then refused: batches of 30 into the last 10
// events. shop is the project that sent; blog is another project of the same account;
// the stranger's project belongs to another account.
type refusingStack struct {
	*stack
	col              *testenv.Collector
	owner, ownerMail string
	shop, blog       string
	stranger         string
	strangerProject  string
	memberMail       string // a member (not owner) of shop
	refusedRecords   int
	firstRefusal     time.Time // just before the first refused request was sent
}

const (
	refusedLimit = 100
	refusedBatch = 30
)

func startRefusingStack(t *testing.T) *refusingStack {
	t.Helper()
	n := testenv.StartNATS(t)
	startValidator(t, n.URL())
	// The control plane's address is chosen first: the receiver lets only its pages read.
	cpListen := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	col := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/receiver.yaml",
		Env: map[string]string{"NATS_URL": n.URL(), "SVC_STREAM_REPLICAS": "1", "SVC_DASHBOARD_ORIGIN": "http://" + cpListen}})
	cp := testenv.StartControlPlane(t, map[string]string{"NATS_URL": n.URL(), "SVC_JWT_SECRET": testJWTSecret,
		"SVC_DATA_DIR": t.TempDir(), "SVC_PUBLIC_RECEIVER_URL": col.HTTP, "SVC_CONTROLPLANE_LISTEN": cpListen})
	rs := &refusingStack{stack: &stack{nats: n, cp: cp}, col: col, ownerMail: "refused-owner@example.com"}
	rs.owner, _ = rs.signup(t, rs.ownerMail)
	rs.shop = call(t, cp.URL, "POST", "/api/v1/projects", rs.owner, map[string]string{"name": "shop"}).str("id")
	rs.blog = call(t, cp.URL, "POST", "/api/v1/projects", rs.owner, map[string]string{"name": "blog"}).str("id")
	rs.memberMail = "refused-member@example.com"
	rs.signup(t, rs.memberMail)
	require.Equal(t, http.StatusCreated, call(t, cp.URL, "POST", "/api/v1/projects/"+rs.shop+"/members", rs.owner, map[string]string{"email": rs.memberMail}).Status)
	rs.stranger, _ = rs.signup(t, "refused-stranger@example.com")
	rs.strangerProject = call(t, cp.URL, "POST", "/api/v1/projects", rs.stranger, map[string]string{"name": "elsewhere"}).str("id")
	key := call(t, cp.URL, "POST", "/api/v1/projects/"+rs.shop+"/keys", rs.owner, map[string]string{"name": "k"}).str("key")
	require.NotEmpty(t, key)
	strangerKey := call(t, cp.URL, "POST", "/api/v1/projects/"+rs.strangerProject+"/keys", rs.stranger, map[string]string{"name": "k"}).str("key")

	out, code := accountsCLI(t, rs.stack, "set-limit", rs.ownerMail, strconv.Itoa(refusedLimit))
	require.Zero(t, code, "%s", out)

	// The key reaches the receiver's mirror within a second.
	require.Eventually(t, func() bool { return postBatch(t, col.HTTP, key, refusedBatch) == http.StatusAccepted },
		10*time.Second, 50*time.Millisecond, "the receiver never took the first batch")
	for range 2 {
		require.Equal(t, http.StatusAccepted, postBatch(t, col.HTTP, key, refusedBatch))
	}
	// 90 of 100 used: each batch of 30 is refused whole, though 10 events are left.
	rs.firstRefusal = time.Now().Add(-time.Second).Truncate(time.Second)
	for range 5 {
		require.Equal(t, http.StatusTooManyRequests, postBatch(t, col.HTTP, key, refusedBatch))
		rs.refusedRecords += refusedBatch
	}
	require.Eventually(t, func() bool { return postBatch(t, col.HTTP, strangerKey, 1) == http.StatusAccepted },
		10*time.Second, 50*time.Millisecond, "the stranger's event was never taken")
	return rs
}

// postBatch sends a JSON array of n events and returns the status.
func postBatch(t *testing.T, receiver, key string, n int) int {
	t.Helper()
	objs := make([]string, n)
	for i := range objs {
		objs[i] = fmt.Sprintf(`{"n": %d}`, i)
	}
	req, err := http.NewRequest("POST", receiver+"/v1/events/batch", strings.NewReader("["+strings.Join(objs, ",")+"]"))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// After refusals the usage answers say how many records were refused
// this month and why, and since when the account refuses, instead of "90%" alone; a
// project's answer counts its own refusals only (with its account's refusing_since, as
// its events are refused too); another account sees nothing of it; a raised limit ends
// refusing_since and keeps the count.
func TestUsageCountsRefusedRecords(t *testing.T) {
	rs := startRefusingStack(t)
	cp := rs.cp.URL

	var u reply
	require.Eventually(t, func() bool {
		u = call(t, cp, "GET", "/api/v1/usage", rs.owner, nil)
		return u.Status == http.StatusOK && u.Body["refused"] == float64(rs.refusedRecords)
	}, 10*time.Second, 50*time.Millisecond, "the usage never showed %d refused records: %s", rs.refusedRecords, u.Raw)
	assert.Equal(t, map[string]any{"quota": float64(rs.refusedRecords)}, u.Body["refused_by_reason"])
	assert.EqualValues(t, 90, u.Body["events"], "refused records are not events")
	assert.EqualValues(t, 10, u.Body["remaining"])
	since, err := time.Parse(time.RFC3339, u.str("refusing_since"))
	require.NoError(t, err, "refusing_since: %s", u.Raw)
	assert.False(t, since.Before(rs.firstRefusal), "refusing since %v, before the first refusal (%v)", since, rs.firstRefusal)
	assert.WithinDuration(t, rs.firstRefusal, since, 30*time.Second)
	byName := map[string]map[string]any{}
	for _, p := range u.Body["projects"].([]any) {
		byName[p.(map[string]any)["name"].(string)] = p.(map[string]any)
	}
	assert.EqualValues(t, rs.refusedRecords, byName["shop"]["refused"])
	assert.EqualValues(t, 0, byName["blog"]["refused"])

	shop := call(t, cp, "GET", "/api/v1/projects/"+rs.shop+"/usage", rs.owner, nil)
	require.Equal(t, http.StatusOK, shop.Status, "%s", shop.Raw)
	assert.EqualValues(t, rs.refusedRecords, shop.Body["refused"])
	assert.Equal(t, u.str("refusing_since"), shop.str("refusing_since"))
	// The blog sent nothing: none of the shop's refusals are its, but its account refuses.
	blog := call(t, cp, "GET", "/api/v1/projects/"+rs.blog+"/usage", rs.owner, nil)
	require.Equal(t, http.StatusOK, blog.Status, "%s", blog.Raw)
	assert.EqualValues(t, 0, blog.Body["refused"])
	assert.Equal(t, map[string]any{}, blog.Body["refused_by_reason"])
	assert.Equal(t, u.str("refusing_since"), blog.str("refusing_since"))

	// Another account: nothing refused, not refusing.
	for _, path := range []string{"/api/v1/usage", "/api/v1/projects/" + rs.strangerProject + "/usage"} {
		o := call(t, cp, "GET", path, rs.stranger, nil)
		require.Equal(t, http.StatusOK, o.Status, "%s", o.Raw)
		assert.EqualValues(t, 0, o.Body["refused"], path)
		assert.Equal(t, map[string]any{}, o.Body["refused_by_reason"], path)
		assert.NotContains(t, o.Body, "refusing_since", path)
	}

	// The operator raises the limit: no longer refusing; the month's refusals stay counted.
	out, code := accountsCLI(t, rs.stack, "set-limit", rs.ownerMail, "1000")
	require.Zero(t, code, "%s", out)
	u = call(t, cp, "GET", "/api/v1/usage", rs.owner, nil)
	assert.NotContains(t, u.Body, "refusing_since", "%s", u.Raw)
	assert.EqualValues(t, rs.refusedRecords, u.Body["refused"])
}
