// Package internal_test checks the layout's one rule: a package under internal/ but not
// under internal/collector/ links no collector code (so the control plane, which is
// upgraded apart from the collectors, may import any of them), and every package under
// internal/collector/ does (otherwise it belongs one level up, where the control plane
// can share it).
package internal_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/otelcol-svc/otelcol-svc/"

func TestCollectorBoundPackagesLiveUnderInternalCollector(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	out, err := exec.Command(goBin, "list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg, deps := strings.TrimPrefix(f[0], module+"internal/"), f[1:]
		if pkg == "tools" || strings.HasPrefix(pkg, "tools/") {
			continue
		}
		bound := ""
		for _, d := range deps {
			if strings.HasPrefix(d, "go.opentelemetry.io/collector") || strings.HasPrefix(d, "github.com/open-telemetry/opentelemetry-collector-contrib") {
				bound = d
				break
			}
		}
		under := strings.HasPrefix(pkg, "collector/")
		switch {
		case bound != "" && !under:
			t.Errorf("internal/%s links collector code (%s): move it under internal/collector/", pkg, bound)
		case bound == "" && under:
			t.Errorf("internal/%s links no collector code: move it out of internal/collector/, where the control plane may share it", pkg)
		}
	}
}
