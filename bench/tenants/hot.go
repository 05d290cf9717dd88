package main

import (
	"fmt"
	"sync"
	"time"

	"github.com/otelcol-svc/otelcol-svc/bench/internal/benchkit"
)

// hotWarmup is sent before each round's measured part and not counted: with consumers
// that stop pulling when idle, it also lets the hot project's consumer wake up.
const hotWarmup = time.Second

// hot is one project's ingest -> agent latency while the others stay idle.
type hot struct {
	Projects  int     `json:"projects"`
	Rate      float64 `json:"target_events_per_sec"`
	Sent      int     `json:"sent"` // measured parts
	Refused   int     `json:"refused"`
	Lost      int     `json:"lost"` // accepted, never at the agent
	Duplicate int     `json:"duplicates"`
	// EndToEnd: from just before the event's POST /v1/events to when the agent had read
	// the call that carried it. Ingest: the POST until its 202.
	EndToEnd       benchkit.Dist `json:"ingest_to_agent"`
	Ingest         benchkit.Dist `json:"ingest_request"`
	CollectorCores float64       `json:"collector_cores"`
	NATSCores      float64       `json:"nats_cores"`
	OtherCores     float64       `json:"other_cores"`
	StealCores     float64       `json:"steal_cores"`

	e2e, ingest          []time.Duration
	collector, nats, own benchkit.CPUSnap // CPU time of the measured parts
	seconds              float64
}

// hotRound sends the first project rate events/s for d after a warm-up, each its own
// POST (paced by schedule, each in its own goroutine so a slow answer does not slow the
// pace), measures each event's way to the agent, and adds it to h.
func (e *env) hotRound(h *hot, rate float64, d time.Duration) {
	p := e.projects[0]
	h.Projects, h.Rate = len(e.projects), rate
	interval := time.Duration(float64(time.Second) / rate)
	nWarm := int(hotWarmup / interval)
	nAll := nWarm + max(1, int(d/interval))
	e.ag.hotArrivals() // nothing from before counts

	var mu sync.Mutex
	accepted := map[int64]bool{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 256)
	cp, np := e.col.Pid(), e.nats.pid()
	var c0, n0 benchkit.CPUSnap
	var measured time.Time
	start := time.Now()
	for i := range nAll {
		if w := time.Until(start.Add(time.Duration(i) * interval)); w > 0 {
			time.Sleep(w)
		}
		if i == nWarm {
			measured, c0, n0 = time.Now(), benchkit.ReadCPU(cp), benchkit.ReadCPU(np)
		}
		sem <- struct{}{}
		wg.Add(1)
		go func(seq int64) {
			defer wg.Done()
			defer func() { <-sem }()
			t0 := time.Now()
			refusal := e.send(p.key, fmt.Appendf(nil, `{"bench":"hot","seq":%d,"sent_ns":%d}`, seq, t0.UnixNano()))
			el := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			if refusal != "" {
				if seq >= int64(nWarm) {
					h.Refused++
				}
				return
			}
			accepted[seq] = true
			if seq >= int64(nWarm) {
				h.ingest = append(h.ingest, el)
			}
		}(int64(i))
	}
	wg.Wait()
	h.seconds += time.Since(measured).Seconds()
	c1, n1 := benchkit.ReadCPU(cp), benchkit.ReadCPU(np)
	h.collector = h.collector.Add(c0, c1)
	h.nats = h.nats.Add(n0, n1)
	h.Sent += nAll - nWarm

	// Every accepted event should be at the agent within moments; wait for stragglers.
	for deadline := time.Now().Add(15 * time.Second); e.ag.hotCount() < len(accepted) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	for seq, a := range e.ag.hotArrivals() {
		h.Duplicate += a.dup
		if accepted[seq] {
			if seq >= int64(nWarm) {
				h.e2e = append(h.e2e, a.at.Sub(a.sent))
			}
			delete(accepted, seq)
		}
	}
	h.Lost += len(accepted)
}

// summarize turns the rounds' samples into the report's figures.
func (h *hot) summarize() {
	h.EndToEnd, h.Ingest = benchkit.DistOf(h.e2e), benchkit.DistOf(h.ingest)
	if h.seconds > 0 {
		u := benchkit.Since(benchkit.CPUSnap{}, h.collector, time.Duration(h.seconds*float64(time.Second)))
		h.CollectorCores, h.StealCores = u.Collector, u.Steal
		h.NATSCores = h.nats.Collector.Seconds() / h.seconds
		h.OtherCores = max(0, u.Other-h.NATSCores)
	}
}
