package main

import (
	"encoding/json"
	"github.com/otelcol-svc/otelcol-svc/bench/internal/benchkit"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"
)

// agent plays the customer's agent on a local HTTP server: it answers every call 200
// {"status":"accepted"} at once. Legacy calls (a JSON array of records) are counted;
// window calls are kept with their receive time and decoded after the phase, so the
// agent adds as little as possible to the latency it measures. Path /ref answers the
// same way and keeps nothing: it is the target of the direct-POST reference.
type agent struct {
	*httptest.Server
	calls   atomic.Int64
	records atomic.Int64 // elements of the legacy calls' arrays
	invalid atomic.Int64 // legacy bodies that are not a JSON array

	mu      sync.Mutex
	windows []windowCall
}

type windowCall struct {
	at   time.Time // when the whole body had been read
	body []byte
}

func startAgent(r *benchkit.Runner, window bool) *agent {
	a := &agent{}
	answer := func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"accepted"}`))
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /ref", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		answer(w)
	})
	mux.HandleFunc("POST /", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		at := time.Now()
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		a.calls.Add(1)
		if window {
			a.mu.Lock()
			a.windows = append(a.windows, windowCall{at: at, body: body})
			a.mu.Unlock()
		} else {
			var arr []json.RawMessage
			if json.Unmarshal(body, &arr) != nil {
				a.invalid.Add(1)
			}
			a.records.Add(int64(len(arr)))
		}
		answer(w)
	})
	a.Server = httptest.NewServer(mux)
	r.Cleanup(a.Close)
	return a
}

// lastWindow is the body of the latest window call, nil before the first.
func (a *agent) lastWindow() []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.windows) == 0 {
		return nil
	}
	return a.windows[len(a.windows)-1].body
}

func (a *agent) windowCalls() []windowCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]windowCall(nil), a.windows...)
}
