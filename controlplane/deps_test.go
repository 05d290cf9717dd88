package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The control plane links no collector code: it is upgraded apart from the collectors,
// and pipelines' OTTL is checked by them (internal/validation). A new import that pulls
// a collector package in (internal/collector/mirrorcache, pipelinecfg, records, ...) fails
// here, naming the packages.
func TestLinksNoCollectorCode(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	var collector []string
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "go.opentelemetry.io/collector") {
			collector = append(collector, pkg)
		}
	}
	if len(collector) > 0 {
		t.Errorf("the control plane links %d collector packages: %s", len(collector), strings.Join(collector, ", "))
	}
}
