// Command svc-devkey mints a project API key straight into the configuration mirror, and
// optionally sets the project's pipeline, for running the data plane without the control
// plane (a first try, a test bench, a bare receiver). It prints the key once; only its
// hash is stored. Expressions are checked with the same compiler the pipeline uses.
//
//	go run ./cmd/svc-devkey -project demo [-agent URL -trigger EXPR] [-nats nats://127.0.0.1:4223]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinecfg"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/internal/webhooksig"
)

func main() {
	url := flag.String("nats", envOr("NATS_URL", natsclient.DefaultURL), "NATS URL (default: $NATS_URL, else the embedded server)")
	project := flag.String("project", "demo", "project id: letters, digits, '-' and '_'")
	var p mirror.Pipeline
	flag.StringVar(&p.AgentEndpointURL, "agent", "", "agent endpoint URL (the project is consumed only with one)")
	flag.StringVar(&p.Trigger, "trigger", "", "OTTL trigger; empty matches every record")
	flag.BoolVar(&p.WindowEnabled, "window", false, "window mode instead of batches")
	flag.StringVar(&p.GroupKey, "group-key", "", "window mode: group key, e.g. traceId")
	flag.StringVar(&p.ContextFilter, "context-filter", "", "window mode: which records are stored in the window")
	flag.IntVar(&p.BatchSize, "batch-size", 0, "legacy mode: records per call (default 10)")
	flag.Parse()
	if err := run(*url, *project, p); err != nil {
		fmt.Fprintln(os.Stderr, "svc-devkey:", err)
		os.Exit(1)
	}
}

func run(url, project string, p mirror.Pipeline) error {
	if !streams.ValidProjectID(project) {
		return fmt.Errorf("project id %q: use 1-64 letters, digits, '-' or '_'", project)
	}
	if _, err := pipelinecfg.Compile(p); err != nil {
		return err
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
	secret := webhooksig.NewSecret()
	now := time.Now().UTC()
	if err := m.PutProject(ctx, mirror.Project{ID: project, Name: project, Version: now.UnixNano(), Pipeline: p, SigningSecret: secret, UpdatedAt: now}); err != nil {
		return err
	}
	key := apikey.Generate(apikey.KindProject)
	keyID := "dev-" + apikey.Hash(key)[:8]
	if err := m.PutKey(ctx, apikey.Hash(key), mirror.KeyEntry{KeyID: keyID, ProjectID: project, Scope: mirror.ScopeProject}); err != nil {
		return err
	}
	fmt.Printf("project %s, key id %s\n%s\n(shown once: only its hash is stored)\n", project, keyID, key)
	if p.AgentEndpointURL != "" {
		fmt.Printf("agent calls go to %s, signed with %s\n", p.AgentEndpointURL, secret)
	}
	return nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
