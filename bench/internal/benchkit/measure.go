package benchkit

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Since turns the CPU spent from a to b, during elapsed, into cores.
func Since(a, b CPUSnap, elapsed time.Duration) CPUUse {
	sec := elapsed.Seconds()
	c, s := (b.Collector-a.Collector).Seconds()/sec, (b.Self-a.Self).Seconds()/sec
	return CPUUse{Collector: c, Bench: s, Other: max(0, (b.Busy-a.Busy).Seconds()/sec-c-s), Steal: (b.Steal - a.Steal).Seconds() / sec}
}

// CPUUse is the CPU spent during a phase, in cores (CPU seconds per second).
type CPUUse struct {
	Collector float64 `json:"collector_cores"`
	Bench     float64 `json:"bench_cores"` // this process: NATS server, the endpoints, load
	Other     float64 `json:"other_cores"` // the rest of the machine: should be ~0
	Steal     float64 `json:"steal_cores"` // taken by the hypervisor: should be ~0
}

// Disturbed describes what, besides the benchmark, used the machine during a run: other
// processes (other, in cores) and the hypervisor (steal, in cores). Empty when neither
// reached a tenth of a core, the level below which runs of the same code agree.
func Disturbed(other, steal float64) string {
	var parts []string
	if other >= 0.1 {
		parts = append(parts, fmt.Sprintf("other processes used up to %.2f cores", other))
	}
	if steal >= 0.1 {
		parts = append(parts, fmt.Sprintf("the hypervisor took up to %.2f cores (steal: the host is shared and busy)", steal))
	}
	if len(parts) == 0 {
		return ""
	}
	return "WARNING: " + strings.Join(parts, ", and ") + " during the run;\n" +
		"  the figures are not representative of this machine (ratios are less affected). Run again when it is idle."
}

// Percentile is the nearest-rank percentile of sorted durations.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// Dist is the distribution of a set of durations, in milliseconds.
type Dist struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

// DistOf summarises d (which it does not modify).
func DistOf(d []time.Duration) Dist {
	s := slices.Clone(d)
	slices.Sort(s)
	return Dist{Count: len(s), P50: Ms(Percentile(s, 0.5)), P90: Ms(Percentile(s, 0.9)), P99: Ms(Percentile(s, 0.99)), Max: Ms(Percentile(s, 1))}
}

// Ms is d in milliseconds with microsecond resolution.
func Ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
