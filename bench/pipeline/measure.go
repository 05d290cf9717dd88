package main

import (
	"github.com/otelcol-svc/otelcol-svc/bench/internal/benchkit"
	"slices"
	"time"
)

// since turns the CPU spent from a to b, during elapsed, into cores.
func since(a, b benchkit.CPUSnap, elapsed time.Duration) cpuUse {
	sec := elapsed.Seconds()
	c, s := (b.Collector-a.Collector).Seconds()/sec, (b.Self-a.Self).Seconds()/sec
	return cpuUse{Collector: c, Bench: s, Other: max(0, (b.Busy-a.Busy).Seconds()/sec-c-s)}
}

// cpuUse is the CPU spent during a phase, in cores (CPU seconds per second).
type cpuUse struct {
	Collector float64 `json:"collector_cores"`
	Bench     float64 `json:"bench_cores"` // this process: NATS server (throughput), agent, load
	Other     float64 `json:"other_cores"` // the rest of the machine: should be ~0
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// dist is the distribution of a set of durations, in milliseconds.
type dist struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

func distOf(d []time.Duration) dist {
	s := slices.Clone(d)
	slices.Sort(s)
	return dist{Count: len(s), P50: ms(percentile(s, 0.5)), P90: ms(percentile(s, 0.9)), P99: ms(percentile(s, 0.99)), Max: ms(percentile(s, 1))}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
