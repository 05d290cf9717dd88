package main

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuSnap is a reading of CPU time consumed so far: by the collector process, by this
// benchmark process (which also runs the in-process NATS server of the throughput phase
// and the local agent), and by the whole machine. Differences between two snapshots show
// where a phase's CPU went, and whether something else on the machine was busy.
type cpuSnap struct {
	collector, self, busy time.Duration
}

// clockTick is USER_HZ, the unit of /proc times: 100 on every Linux platform Go runs on.
const clockTick = 10 * time.Millisecond

func readCPU(pid int) cpuSnap {
	var s cpuSnap
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); pid > 0 && err == nil {
		// Fields after the command name (which may hold spaces, hence the last ')'):
		// state is field 3, utime and stime are fields 14 and 15.
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 {
			f := strings.Fields(string(b[i+1:]))
			if len(f) > 12 {
				u, _ := strconv.ParseInt(f[11], 10, 64)
				k, _ := strconv.ParseInt(f[12], 10, 64)
				s.collector = time.Duration(u+k) * clockTick
			}
		}
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		// "cpu  user nice system idle iowait irq softirq steal ...": busy is all but idle
		// and iowait.
		line, _, _ := strings.Cut(string(b), "\n")
		for i, v := range strings.Fields(line)[1:] {
			n, _ := strconv.ParseInt(v, 10, 64)
			if i != 3 && i != 4 && i < 8 {
				s.busy += time.Duration(n) * clockTick
			}
		}
	}
	return s
}

// since turns the CPU spent from a to b, during elapsed, into cores.
func since(a, b cpuSnap, elapsed time.Duration) cpuUse {
	sec := elapsed.Seconds()
	c, s := (b.collector-a.collector).Seconds()/sec, (b.self-a.self).Seconds()/sec
	return cpuUse{Collector: c, Bench: s, Other: max(0, (b.busy-a.busy).Seconds()/sec-c-s)}
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
