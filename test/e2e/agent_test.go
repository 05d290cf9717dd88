package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// agentCall is one POST the pipeline made to the customer's agent.
type agentCall struct {
	Method string
	Header http.Header
	Body   []byte
	At     time.Time
	Status int // what the stub answered; only 2xx counts as delivered
}

// testAgent plays the customer's agent: it records every call, whatever it answered,
// and answers as its respond function says (200 {"status":"accepted"} by default).
type testAgent struct {
	*httptest.Server
	mu      sync.Mutex
	arrived int // attempts, counted when they arrive (a timed-out one never completes)
	calls   []agentCall
	cut     []agentCall // calls the caller gave up on before the answer (never answered)
	respond func(n int, r *http.Request) (status int, delay time.Duration)
}

func startAgent(t *testing.T) *testAgent {
	t.Helper()
	a := &testAgent{}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		n := a.arrived
		a.arrived++
		respond := a.respond
		a.mu.Unlock()
		status, delay := http.StatusOK, time.Duration(0)
		if respond != nil {
			status, delay = respond(n, r)
		}
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				a.mu.Lock()
				a.cut = append(a.cut, agentCall{Method: r.Method, Header: r.Header.Clone(), Body: body, At: time.Now()})
				a.mu.Unlock()
				return
			}
		}
		a.mu.Lock()
		a.calls = append(a.calls, agentCall{Method: r.Method, Header: r.Header.Clone(), Body: body, At: time.Now(), Status: status})
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"status":"accepted"}`))
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *testAgent) setRespond(f func(n int, r *http.Request) (int, time.Duration)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.respond = f
}

// delivered returns the bodies of the calls answered 2xx.
func (a *testAgent) delivered() []agentCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []agentCall
	for _, c := range a.calls {
		if c.Status/100 == 2 {
			out = append(out, c)
		}
	}
	return out
}

// received returns every call that was answered, 2xx or not, in arrival order.
func (a *testAgent) received() []agentCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]agentCall(nil), a.calls...)
}

// cutOff returns the calls whose caller gave up (or went away) before they were answered:
// the agent received their records all the same.
func (a *testAgent) cutOff() []agentCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]agentCall(nil), a.cut...)
}

func (a *testAgent) attempts() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.arrived
}

// batchRecords decodes legacy-mode calls: each body is a JSON array of records.
func batchRecords(t *testing.T, calls []agentCall) (batches [][]json.RawMessage) {
	t.Helper()
	for _, c := range calls {
		var arr []json.RawMessage
		if err := json.Unmarshal(c.Body, &arr); err != nil {
			t.Fatalf("agent body is not a JSON array: %v: %s", err, c.Body)
		}
		batches = append(batches, arr)
	}
	return batches
}
