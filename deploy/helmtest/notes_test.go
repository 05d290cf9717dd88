package helmtest

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// renderNotes renders templates/NOTES.txt, which helm template and helm lint leave out
// (only an install shows it, and a template error there fails the install): a copy of
// the chart renders it into a ConfigMap with tpl, in the chart's own context.
func renderNotes(t *testing.T, args ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "otelcol-svc")
	err := filepath.WalkDir(chartDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(chartDir, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	notes, err := os.ReadFile(filepath.Join(chartDir, "templates", "NOTES.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "files", "NOTES.txt"), notes, 0o644); err != nil {
		t.Fatal(err)
	}
	show := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\ndata:\n  notes: {{ tpl (.Files.Get \"files/NOTES.txt\") . | quote }}\n"
	if err := os.WriteFile(filepath.Join(dir, "templates", "zz-notes.yaml"), []byte(show), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runHelm(t, append([]string{"template", release, dir, "--show-only", "templates/zz-notes.yaml"}, args...)...)
	if err != nil {
		t.Fatalf("rendering NOTES.txt: %v\n%s", err, errOut)
	}
	obj, err := decodeStrict([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*corev1.ConfigMap).Data["notes"]
}

// What an install prints: how to reach the services, where NATS is expected (its
// credentials left out), and a warning while the control plane's database would be lost
// with its pod.
func TestInstallNotes(t *testing.T) {
	notes := renderNotes(t)
	for _, want := range []string{
		"svc/otelcol-svc-receiver", "svc/otelcol-svc-controlplane", "nats://otelcol-svc-nats:4222",
		"WARNING: postgresql.url is not set",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("default NOTES lack %q:\n%s", want, notes)
		}
	}

	notes = renderNotes(t, "-f", filepath.Join(chartDir, "ci/scale-out-values.yaml"))
	if strings.Contains(notes, "s3cret") {
		t.Errorf("NOTES show the NATS password:\n%s", notes)
	}
	if !strings.Contains(notes, "nats://redacted@nats-0.nats:4222") || !strings.Contains(notes, "nats://redacted@nats-2.nats:4222") {
		t.Errorf("NOTES do not name the NATS servers with their credentials redacted:\n%s", notes)
	}
	if strings.Contains(notes, "WARNING") {
		t.Errorf("NOTES warn although PostgreSQL is given:\n%s", notes)
	}
}
