package benchkit

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPUSnap is a reading of CPU time consumed so far: by the collector process, by the benchmark
// process itself (its load generator, and whatever it runs in-process), and by the whole machine. Differences between two snapshots show
// where a phase's CPU went, and whether something else on the machine was busy.
type CPUSnap struct {
	Collector, Self, Busy time.Duration
	// Steal is time this virtual machine's CPUs were ready to run but the hypervisor ran
	// another guest. It is not in Busy: it shows as nobody's CPU time, only as slowness,
	// and on a shared host it is the usual reason two runs of the same code differ.
	Steal time.Duration
}

// clockTick is USER_HZ, the unit of /proc times: 100 on every Linux platform Go runs on.
const clockTick = 10 * time.Millisecond

func ReadCPU(pid int) CPUSnap {
	var s CPUSnap
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); pid > 0 && err == nil {
		// Fields after the command name (which may hold spaces, hence the last ')'):
		// state is field 3, utime and stime are fields 14 and 15.
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 {
			f := strings.Fields(string(b[i+1:]))
			if len(f) > 12 {
				u, _ := strconv.ParseInt(f[11], 10, 64)
				k, _ := strconv.ParseInt(f[12], 10, 64)
				s.Collector = time.Duration(u+k) * clockTick
			}
		}
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.Self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		s.Busy, s.Steal = machineCPU(line)
	}
	return s
}

// machineCPU reads the first line of /proc/stat, "cpu  user nice system idle iowait irq
// softirq steal guest guest_nice": busy is user to softirq but idle and iowait; guest time
// is already counted in user.
func machineCPU(line string) (busy, steal time.Duration) {
	f := strings.Fields(line)
	if len(f) == 0 || f[0] != "cpu" {
		return 0, 0
	}
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		switch {
		case i == 7:
			steal = time.Duration(n) * clockTick
		case i != 3 && i != 4 && i < 7:
			busy += time.Duration(n) * clockTick
		}
	}
	return busy, steal
}

// Add returns s plus the CPU spent from a to b, to total several timed rounds.
func (s CPUSnap) Add(a, b CPUSnap) CPUSnap {
	return CPUSnap{s.Collector + b.Collector - a.Collector, s.Self + b.Self - a.Self, s.Busy + b.Busy - a.Busy, s.Steal + b.Steal - a.Steal}
}
