package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/otelcol-svc/otelcol-svc/bench/internal/benchkit"
)

// agent plays every project's agent (POST /agent/<project>) and webhook destination
// (POST /webhook/<project>) on one local server, answering 200 at once. It notes, per
// project, the highest readiness round whose event arrived, and the arrival time of each
// numbered event of the hot project.
type agent struct {
	*httptest.Server
	calls, webhooks, invalid atomic.Int64

	mu      sync.Mutex
	round   map[string]int    // project -> highest readiness round received
	reached map[int]int       // round -> projects that have reached it
	lastAt  map[int]time.Time // round -> when the last of them did
	hot     map[int64]hotArrival
}

type hotArrival struct {
	sent, at time.Time
	dup      int
}

// event is what the benchmark ingests: a readiness event carries its round, a hot event
// its number and when it was sent. The pipeline delivers each record as it was ingested.
type event struct {
	Round  int    `json:"round,omitempty"`
	Seq    *int64 `json:"seq,omitempty"`
	SentNs int64  `json:"sent_ns,omitempty"`
}

func startAgent(r *benchkit.Runner) *agent {
	a := &agent{round: map[string]int{}, reached: map[int]int{}, lastAt: map[int]time.Time{}, hot: map[int64]hotArrival{}}
	ok := func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"accepted"}`))
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /agent/{project}", func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		at := time.Now()
		var evs []event
		if err != nil || json.Unmarshal(body, &evs) != nil {
			a.invalid.Add(1)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		a.calls.Add(1)
		a.note(req.PathValue("project"), evs, at)
		ok(w)
	})
	mux.HandleFunc("POST /webhook/{project}", func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		a.webhooks.Add(1)
		ok(w)
	})
	a.Server = httptest.NewServer(mux)
	r.Cleanup(a.Close)
	return a
}

func (a *agent) note(project string, evs []event, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range evs {
		switch {
		case e.Seq != nil:
			h, seen := a.hot[*e.Seq]
			if seen {
				h.dup++
			} else {
				h = hotArrival{sent: time.Unix(0, e.SentNs), at: at}
			}
			a.hot[*e.Seq] = h
		case e.Round > a.round[project]:
			a.round[project] = e.Round
			a.reached[e.Round]++
			a.lastAt[e.Round] = at
		}
	}
}

// reachedRound is how many projects' events of round have arrived, and when the last did.
func (a *agent) reachedRound(round int) (int, time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.reached[round], a.lastAt[round]
}

// hotArrivals returns and forgets what the hot project's events did.
func (a *agent) hotArrivals() map[int64]hotArrival {
	a.mu.Lock()
	defer a.mu.Unlock()
	h := a.hot
	a.hot = map[int64]hotArrival{}
	return h
}

func (a *agent) hotCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.hot)
}
