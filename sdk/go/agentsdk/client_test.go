package agentsdk

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// receiver plays the receiver's /internal/agent-output: it records what it got and
// answers with the next of answers (the last one repeats).
type receiver struct {
	mu       sync.Mutex
	answers  []func(w http.ResponseWriter)
	requests []*http.Request
	bodies   []string
}

func newReceiver(t *testing.T, answers ...func(w http.ResponseWriter)) (*receiver, *httptest.Server) {
	rc := &receiver{answers: answers}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		n := len(rc.requests)
		rc.requests = append(rc.requests, r)
		rc.bodies = append(rc.bodies, string(b))
		rc.mu.Unlock()
		rc.answers[min(n, len(rc.answers)-1)](w)
	}))
	t.Cleanup(srv.Close)
	return rc, srv
}

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.requests)
}

func answer(status int, retryAfter, body string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

var accepted = answer(http.StatusAccepted, "", `{"accepted":true,"request_id":"`+testID+`"}`)

func fastBackoff(t *testing.T) {
	old := firstBackoff
	firstBackoff = time.Millisecond
	t.Cleanup(func() { firstBackoff = old })
}

func TestSendResultRequest(t *testing.T) {
	rc, srv := newReceiver(t, accepted)
	c := &Client{ReceiverURL: srv.URL + "/", APIKey: "sk_test_1"}
	payload := map[string]any{"summary": "p95 > 2s & rising", "severity": "high"}
	if err := c.SendResult(context.Background(), testID, payload); err != nil {
		t.Fatal(err)
	}
	r := rc.requests[0]
	if r.Method != http.MethodPost || r.URL.Path != "/internal/agent-output" {
		t.Fatalf("%s %s", r.Method, r.URL.Path)
	}
	if r.Header.Get("X-API-Key") != "sk_test_1" || r.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("headers %v", r.Header)
	}
	want := `{"request_id":"` + testID + `","payload":{"severity":"high","summary":"p95 > 2s & rising"}}`
	if rc.bodies[0] != want {
		t.Fatalf("body\n got %s\nwant %s", rc.bodies[0], want)
	}
}

func TestSendResultRawPayloadIsSentAsIs(t *testing.T) {
	rc, srv := newReceiver(t, accepted)
	c := &Client{ReceiverURL: srv.URL, APIKey: "k"}
	raw := json.RawMessage(`{ "n": 1.50, "z": [ ] }`)
	if err := c.SendResult(context.Background(), testID, raw); err != nil {
		t.Fatal(err)
	}
	if want := `{"request_id":"` + testID + `","payload":{ "n": 1.50, "z": [ ] }}`; rc.bodies[0] != want {
		t.Fatalf("body %s, want %s", rc.bodies[0], want)
	}

	if err := c.SendResult(context.Background(), testID, json.RawMessage(`{"a":`)); err == nil || rc.count() != 1 {
		t.Fatalf("invalid raw payload: err %v after %d requests; want an error and no request", err, rc.count())
	}
}

func TestSendResultRetriesOn503AfterRetryAfter(t *testing.T) {
	rc, srv := newReceiver(t,
		answer(http.StatusServiceUnavailable, "1", `{"error":{"code":"unavailable","message":"try again"}}`),
		accepted)
	c := &Client{ReceiverURL: srv.URL, APIKey: "k"}
	start := time.Now()
	if err := c.SendResult(context.Background(), testID, "done"); err != nil {
		t.Fatal(err)
	}
	if rc.count() != 2 {
		t.Fatalf("%d requests, want 2", rc.count())
	}
	if d := time.Since(start); d < 950*time.Millisecond {
		t.Fatalf("retried after %s, before the Retry-After of 1s", d)
	}
	if rc.bodies[0] != rc.bodies[1] {
		t.Fatalf("the retry sent another body: %s vs %s", rc.bodies[0], rc.bodies[1])
	}
}

func TestSendResultAPIErrorOn401(t *testing.T) {
	rc, srv := newReceiver(t, answer(http.StatusUnauthorized, "", `{"error":{"code":"invalid_api_key","message":"the API key is not valid"}}`))
	c := &Client{ReceiverURL: srv.URL, APIKey: "wrong"}
	err := c.SendResult(context.Background(), testID, map[string]int{"a": 1})
	var ae *APIError
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v, want *APIError", err)
	}
	if ae.Status != 401 || ae.Code != "invalid_api_key" || ae.Message != "the API key is not valid" {
		t.Fatalf("APIError %+v", ae)
	}
	if rc.count() != 1 {
		t.Fatalf("%d requests: a 401 must not be retried", rc.count())
	}
}

func TestSendResultGivesUpAfterMaxAttempts(t *testing.T) {
	fastBackoff(t)
	rc, srv := newReceiver(t, answer(http.StatusBadGateway, "", `<html>bad gateway</html>`))
	c := &Client{ReceiverURL: srv.URL, APIKey: "k", MaxAttempts: 3}
	err := c.SendResult(context.Background(), testID, 1)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 502 || ae.Message != "<html>bad gateway</html>" {
		t.Fatalf("err = %v", err)
	}
	if rc.count() != 3 {
		t.Fatalf("%d requests, want MaxAttempts = 3", rc.count())
	}
}

func TestSendResultDoesNotWaitOutALongRetryAfter(t *testing.T) {
	rc, srv := newReceiver(t, answer(http.StatusTooManyRequests, "3600", `{"error":{"code":"quota_exceeded","message":"monthly quota used up"}}`))
	c := &Client{ReceiverURL: srv.URL, APIKey: "k"}
	start := time.Now()
	err := c.SendResult(context.Background(), testID, 1)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Code != "quota_exceeded" || ae.RetryAfter != time.Hour {
		t.Fatalf("err = %v", err)
	}
	if rc.count() != 1 || time.Since(start) > 5*time.Second {
		t.Fatalf("%d requests in %s; want one, at once", rc.count(), time.Since(start))
	}
}

func TestSendResultRetriesConnectionErrors(t *testing.T) {
	fastBackoff(t)
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			// Drop the connection without an answer, as a restarting receiver would.
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		accepted(w)
	}))
	defer srv.Close()
	c := &Client{ReceiverURL: srv.URL, APIKey: "k"}
	if err := c.SendResult(context.Background(), testID, 1); err != nil {
		t.Fatal(err)
	}
	if n.Load() != 2 {
		t.Fatalf("%d attempts, want 2", n.Load())
	}
}

func TestSendResultStopsWaitingWhenContextEnds(t *testing.T) {
	_, srv := newReceiver(t, answer(http.StatusServiceUnavailable, "20", `{"error":{"code":"unavailable","message":"later"}}`))
	c := &Client{ReceiverURL: srv.URL, APIKey: "k"}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.SendResult(ctx, testID, 1)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 503 {
		t.Fatalf("err = %v, want the 503 APIError", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("returned after %s, the context ended after 100ms", time.Since(start))
	}
}

func TestSendResultNeedsRequestID(t *testing.T) {
	rc, srv := newReceiver(t, accepted)
	c := &Client{ReceiverURL: srv.URL, APIKey: "k"}
	if err := c.SendResult(context.Background(), "", 1); err == nil || rc.count() != 0 {
		t.Fatalf("err %v after %d requests", err, rc.count())
	}
}
