package benchkit

import (
	"strings"
	"testing"
	"time"
)

func TestMachineCPUKeepsStealOutOfBusy(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice
	busy, steal := machineCPU("cpu  73523 10 10346 49808 398 5 1470 7529 300 0")
	if want := (73523 + 10 + 10346 + 5 + 1470) * clockTick; busy != want {
		t.Errorf("busy = %v, want %v (user, nice, system, irq, softirq)", busy, want)
	}
	if want := 7529 * clockTick; steal != want {
		t.Errorf("steal = %v, want %v", steal, want)
	}
	if b, s := machineCPU("cpu0 1 2 3 4 5 6 7 8"); b != 0 || s != 0 {
		t.Errorf("a per-CPU line was read as the machine's: %v, %v", b, s)
	}
}

func TestDisturbedNamesWhatTookTheCPU(t *testing.T) {
	if d := Disturbed(0.05, 0.09); d != "" {
		t.Errorf("a quiet run was flagged: %q", d)
	}
	d := Disturbed(0.02, 0.4)
	if !strings.Contains(d, "hypervisor took up to 0.40 cores") || strings.Contains(d, "other processes") {
		t.Errorf("steal alone: %q", d)
	}
	d = Disturbed(0.3, 0.2)
	if !strings.Contains(d, "other processes used up to 0.30 cores") || !strings.Contains(d, "0.20 cores (steal") {
		t.Errorf("both: %q", d)
	}
}

func TestSinceSplitsCores(t *testing.T) {
	a := CPUSnap{}
	b := CPUSnap{Collector: 500 * time.Millisecond, Self: 300 * time.Millisecond, Busy: 1000 * time.Millisecond, Steal: 400 * time.Millisecond}
	u := Since(a, b, time.Second)
	if u.Collector != 0.5 || u.Bench != 0.3 || u.Steal != 0.4 || u.Other < 0.199 || u.Other > 0.201 {
		t.Errorf("Since = %+v", u)
	}
}
