// Command svc-devkey mints a project API key straight into the configuration mirror, for
// running the data plane without the control plane (a first try, a test bench, a bare
// receiver). It prints the key once; only its hash is stored.
//
//	go run ./cmd/svc-devkey -project demo [-nats nats://127.0.0.1:4223]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/components/apikey"
	"github.com/otelcol-svc/otelcol-svc/components/mirror"
	"github.com/otelcol-svc/otelcol-svc/components/natsclient"
	"github.com/otelcol-svc/otelcol-svc/components/streams"
)

func main() {
	url := flag.String("nats", envOr("NATS_URL", natsclient.DefaultURL), "NATS URL (default: $NATS_URL, else the embedded server)")
	project := flag.String("project", "demo", "project id: letters, digits, '-' and '_'")
	flag.Parse()
	if err := run(*url, *project); err != nil {
		fmt.Fprintln(os.Stderr, "svc-devkey:", err)
		os.Exit(1)
	}
}

func run(url, project string) error {
	if !streams.ValidProjectID(project) {
		return fmt.Errorf("project id %q: use 1-64 letters, digits, '-' or '_'", project)
	}
	nc, err := nats.Connect(url, nats.Timeout(3*time.Second))
	if err != nil {
		return fmt.Errorf("connect to %s (is `make run` running?): %w", url, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := mirror.Open(ctx, js, 1)
	if err != nil {
		return err
	}
	if err := m.PutProject(ctx, mirror.Project{ID: project, Name: project, Version: 1, UpdatedAt: time.Now().UTC()}); err != nil {
		return err
	}
	key := apikey.Generate(apikey.KindProject)
	keyID := "dev-" + apikey.Hash(key)[:8]
	if err := m.PutKey(ctx, apikey.Hash(key), mirror.KeyEntry{KeyID: keyID, ProjectID: project, Scope: mirror.ScopeProject}); err != nil {
		return err
	}
	fmt.Printf("project %s, key id %s\n%s\n(shown once: only its hash is stored)\n", project, keyID, key)
	return nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
