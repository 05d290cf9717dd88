package jetstreamreceiver

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/lifecyclehost"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// stoppingWorker is a pipeline whose batch ends only when its worker is stopped, and
// which then needs the receiver's mutex (as a worker retiring does) before it returns.
type stoppingWorker struct {
	r        *jsReceiver
	entered  chan struct{}
	returned chan struct{}
}

func (s *stoppingWorker) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (s *stoppingWorker) ConsumeLogs(ctx context.Context, _ plog.Logs) error {
	close(s.entered)
	<-ctx.Done()
	s.r.sweep() // takes r.mu
	close(s.returned)
	return ctx.Err()
}

const project = "prj_lockorder"

// startWithBusyWorker starts a receiver whose one worker is inside the pipeline.
func startWithBusyWorker(t *testing.T) (*jsReceiver, *stoppingWorker, *mirror.Store) {
	t.Helper()
	// The real extensions, as the collector runs them: embedded NATS, configmirror and
	// projectauth.
	host := lifecyclehost.New(t)
	url := host[natsclient.DefaultExtension].(natsclient.Embedded).ClientURL()
	m, err := mirrorcache.FromHost(host, mirrorcache.DefaultExtension)
	require.NoError(t, err)
	_, js := testenv.Connect(t, url)
	ctx := context.Background()
	store, err := mirror.Open(ctx, js, 1)
	require.NoError(t, err)
	require.Eventually(t, m.Ready, 10*time.Second, 10*time.Millisecond)

	require.NoError(t, store.PutProject(ctx, mirror.Project{ID: project, Version: 1, AgentSince: time.Now(),
		Pipeline: mirror.Pipeline{AgentEndpointURL: "https://agent.example.com/"}}))
	require.Eventually(t, func() bool { _, ok := m.Project(project); return ok }, 10*time.Second, 10*time.Millisecond)
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, streams.Create(ctx, js, streams.RawConfig(project, cfg.Stream)))
	_, err = js.Publish(ctx, streams.RawSubject(project), []byte(`{"body":"one"}`))
	require.NoError(t, err)

	sink := &stoppingWorker{entered: make(chan struct{}), returned: make(chan struct{})}
	r, err := newReceiver(cfg, receivertest.NewNopSettings(NewFactory().Type()), sink)
	require.NoError(t, err)
	sink.r = r
	require.NoError(t, r.Start(context.Background(), host))
	select {
	case <-sink.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the record never reached the pipeline")
	}
	return r, sink, store
}

// waitOrDeadlock fails the test when done does not close: a receiver waiting for its
// worker while holding the mutex the worker needs never gets there.
func waitOrDeadlock(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s never finished: the receiver waits for its worker while holding the lock the worker needs", what)
	}
}

func TestShutdownStopsAWorkerThatNeedsTheLock(t *testing.T) {
	r, sink, _ := startWithBusyWorker(t)
	shut := make(chan struct{})
	go func() {
		defer close(shut)
		require.NoError(t, r.Shutdown(context.Background()))
	}()
	waitOrDeadlock(t, shut, "Shutdown")
	waitOrDeadlock(t, sink.returned, "the worker")
}

func TestDeletingAProjectStopsAWorkerThatNeedsTheLock(t *testing.T) {
	r, sink, store := startWithBusyWorker(t)
	require.NoError(t, store.DeleteProject(context.Background(), project))
	waitOrDeadlock(t, sink.returned, "the worker")
	require.Eventually(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		_, wanted := r.targets[project]
		return len(r.workers) == 0 && !wanted
	}, 30*time.Second, 10*time.Millisecond, "reconcile stopped consuming the deleted project")

	// The batch the stopped worker held was not acked: it is still on the stream.
	c, err := r.js.Consumer(context.Background(), streams.RawStream(project), r.cfg.Durable)
	require.NoError(t, err)
	info, err := c.Info(context.Background())
	require.NoError(t, err)
	require.Equal(t, uint64(0), info.AckFloor.Stream, "nothing was acked")
	// Not deferred: after a deadlock Shutdown would hang too, hiding the failure.
	require.NoError(t, r.Shutdown(context.Background()))
}
