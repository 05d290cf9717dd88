package main

import (
	"github.com/otelcol-svc/otelcol-svc/bench/internal/benchkit"
	"os/exec"
	"strconv"
	"strings"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// The OTTL condition benchmarks live with the event context as go test benchmarks
// (internal/collector/ottlevent/bench_test.go); this phase runs them and reads their figures, so
// that one run reports all three goals.
var ottlArgs = []string{"test", "-run", "^$", "-bench", "BenchmarkConditionRatio|BenchmarkCondition", "-benchtime", "2s", "./internal/collector/ottlevent/"}

type ottlReport struct {
	Command string `json:"command"`
	// BenchmarkConditionRatio: both contexts evaluated in alternating chunks of 1000 on
	// the same record, so that other work on the machine slows both alike.
	EventNs float64 `json:"event_ns_per_eval"`
	LogNs   float64 `json:"ottllog_ns_per_eval"`
	Ratio   float64 `json:"ratio"`
	// The two separate benchmarks, for comparison (run one after the other).
	EventContextNs    float64 `json:"event_context_ns_per_op"`
	EventContextAlloc float64 `json:"event_context_allocs_per_op"`
	OTTLLogNs         float64 `json:"ottllog_ns_per_op"`
	OTTLLogAlloc      float64 `json:"ottllog_allocs_per_op"`
}

func ottl(r *benchkit.Runner) *ottlReport {
	cmd := exec.Command("go", ottlArgs...)
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.Fatalf("%s: %v\n%s", shellCommand("go", ottlArgs), err, out)
	}
	rep := &ottlReport{Command: shellCommand("go", ottlArgs)}
	// "BenchmarkConditionRatio-2  3000  800000 ns/op  401.2 ns/event-eval  ...": the
	// name, the iterations, then value and unit pairs.
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name, _, _ := strings.Cut(f[0], "-")
		v := map[string]float64{}
		for i := 2; i+1 < len(f); i += 2 {
			x, err := strconv.ParseFloat(f[i], 64)
			if err == nil {
				v[f[i+1]] = x
			}
		}
		switch name {
		case "BenchmarkConditionRatio":
			rep.EventNs, rep.LogNs, rep.Ratio = v["ns/event-eval"], v["ns/ottllog-eval"], v["ratio"]
		case "BenchmarkConditionEventContext":
			rep.EventContextNs, rep.EventContextAlloc = v["ns/op"], v["allocs/op"]
		case "BenchmarkConditionOTTLLog":
			rep.OTTLLogNs, rep.OTTLLogAlloc = v["ns/op"], v["allocs/op"]
		}
	}
	if rep.Ratio == 0 {
		r.Fatalf("no ratio in the output of %s:\n%s", shellCommand("go", ottlArgs), out)
	}
	return rep
}

// shellCommand is the command as one would type it into a shell.
func shellCommand(name string, args []string) string {
	s := name
	for _, a := range args {
		if strings.ContainsAny(a, "^$|* ") {
			a = "'" + a + "'"
		}
		s += " " + a
	}
	return s
}
