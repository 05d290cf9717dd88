// Command agent is a runnable example of a customer's AI agent for otelcol-svc, built on
// the Go SDK (sdk/go/agentsdk). It takes the calls the pipeline makes (batches of
// records, or {trigger, window}), verifies their signature, answers at once, and posts a
// summary of the error records back as the call's result, which the sink then delivers
// to the project's webhooks and chat channels. No LLM is needed: the summary is
// deterministic; put your model where summarise is.
//
// Settings (environment):
//
//	AGENT_LISTEN                 where to listen (default 127.0.0.1:9000); calls go to POST /
//	OTELCOL_SVC_SIGNING_SECRET   the project's whsec_ signing secret (GET .../pipeline as an admin)
//	OTELCOL_SVC_RECEIVER_URL     the receiver (default http://localhost:4318)
//	OTELCOL_SVC_API_KEY          one of the project's API keys
//	AGENT_ALLOW_UNSIGNED=1       accept unsigned calls (a project without a secret); not for production
package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/otelcol-svc/otelcol-svc/sdk/go/agentsdk"
)

func main() {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	a := &agent{
		verifier: agentsdk.Verifier{
			Secret:        os.Getenv("OTELCOL_SVC_SIGNING_SECRET"),
			AllowUnsigned: os.Getenv("AGENT_ALLOW_UNSIGNED") == "1",
		},
		client: &agentsdk.Client{ReceiverURL: env("OTELCOL_SVC_RECEIVER_URL", "http://localhost:4318"), APIKey: os.Getenv("OTELCOL_SVC_API_KEY")},
		logger: logger,
	}
	if a.client.APIKey == "" {
		logger.Error("OTELCOL_SVC_API_KEY is not set: the agent could not send its results back")
		os.Exit(2)
	}
	if a.verifier.Secret == "" && !a.verifier.AllowUnsigned {
		logger.Error("OTELCOL_SVC_SIGNING_SECRET is not set: set it to the project's signing secret (or AGENT_ALLOW_UNSIGNED=1 to test without)")
		os.Exit(2)
	}
	srv := &http.Server{Addr: env("AGENT_LISTEN", "127.0.0.1:9000"), Handler: a, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	logger.Info("agent listening", "addr", srv.Addr, "receiver", a.client.ReceiverURL)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Error("listen", "err", err)
		os.Exit(1)
	}
	// Results still being sent are finished before exit.
	a.pending.Wait()
}

type agent struct {
	verifier agentsdk.Verifier
	client   *agentsdk.Client
	logger   *slog.Logger
	pending  sync.WaitGroup
}

func (a *agent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST calls here", http.StatusMethodNotAllowed)
		return
	}
	call, err := a.verifier.ParseCall(r)
	if err != nil {
		a.logger.Warn("call refused", "err", err)
		http.Error(w, err.Error(), agentsdk.HTTPStatus(err))
		return
	}
	records := call.Records
	if call.Windowed() {
		records = append(append(records, call.Window...), call.Trigger)
	}
	// Answer at once: the pipeline waits for this answer and retries when it times out.
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"status":"accepted"}`))

	a.pending.Add(1)
	go func() {
		defer a.pending.Done()
		res := summarise(records)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := a.client.SendResult(ctx, call.RequestID, res); err != nil {
			a.logger.Error("result not sent", "request_id", call.RequestID, "err", err)
			return
		}
		a.logger.Info("result sent", "request_id", call.RequestID, "errors", res.Errors, "records", res.Records)
	}()
}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
