package jetstreamreceiver

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/lifecyclehost"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/mirrorcache"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/natsclient"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/internal/validation"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// recorder plays the pipeline: it records the raw sequences of each batch it handled.
// block, when set, makes the batch that holds that sequence wait for its context's end
// (a shutdown) and fail, as an agent call interrupted does.
type recorder struct {
	mu      sync.Mutex
	batches [][]uint64
	block   uint64
	blocked chan struct{}
	once    sync.Once
	entered int // batches that reached the block
}

func (p *recorder) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (p *recorder) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	var seqs []uint64
	for lr := range pipelinedata.All(ld) {
		seqs = append(seqs, pipelinedata.Read(lr).Seq)
	}
	if p.block != 0 && slices.Contains(seqs, p.block) {
		p.mu.Lock()
		p.entered++
		p.mu.Unlock()
		p.once.Do(func() { close(p.blocked) })
		<-ctx.Done()
		return ctx.Err()
	}
	p.mu.Lock()
	p.batches = append(p.batches, seqs)
	p.mu.Unlock()
	return nil
}

func (p *recorder) handled() [][]uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.batches)
}

// seqs is every sequence handled, in order, repeats included.
func (p *recorder) seqs() []uint64 {
	var all []uint64
	for _, b := range p.handled() {
		all = append(all, b...)
	}
	return all
}

func (p *recorder) saw(seq uint64) bool { return slices.Contains(p.seqs(), seq) }

type backlogEnv struct {
	t     *testing.T
	host  component.Host
	m     *mirrorcache.Cache
	js    jetstream.JetStream
	store *mirror.Store
	cfg   *Config
}

func newBacklogEnv(t *testing.T, prj string) *backlogEnv {
	t.Helper()
	host := lifecyclehost.New(t)
	url := host[natsclient.DefaultExtension].(natsclient.Embedded).ClientURL()
	m, err := mirrorcache.FromHost(host, mirrorcache.DefaultExtension)
	require.NoError(t, err)
	_, js := testenv.Connect(t, url)
	ctx := context.Background()
	store, err := mirror.Open(ctx, js, 1)
	require.NoError(t, err)
	require.Eventually(t, m.Ready, 10*time.Second, 10*time.Millisecond)
	cfg := createDefaultConfig().(*Config)
	cfg.Linger = 0
	require.NoError(t, streams.Create(ctx, js, streams.RawConfig(prj, cfg.Stream)))
	return &backlogEnv{t: t, host: host, m: m, js: js, store: store, cfg: cfg}
}

// put writes the project and waits until the receiver's mirror has this version.
func (e *backlogEnv) put(p mirror.Project) {
	e.t.Helper()
	require.NoError(e.t, e.store.PutProject(context.Background(), p))
	require.Eventually(e.t, func() bool { q, ok := e.m.Project(p.ID); return ok && q.Version == p.Version }, 10*time.Second, 10*time.Millisecond)
}

// publish stores n records and returns the last one's sequence and stored time.
func (e *backlogEnv) publish(prj string, n int) (uint64, time.Time) {
	e.t.Helper()
	var ack *jetstream.PubAck
	var err error
	for i := range n {
		ack, err = e.js.Publish(context.Background(), streams.RawSubject(prj), fmt.Appendf(nil, `{"n":%d}`, i))
		require.NoError(e.t, err)
	}
	// As the jetstream exporter does after storing records.
	require.NoError(e.t, e.js.Conn().Publish(streams.WakeSubject(streams.WakeRaw, prj), nil))
	m, err := e.js.Stream(context.Background(), streams.RawStream(prj))
	require.NoError(e.t, err)
	msg, err := m.GetMsg(context.Background(), ack.Sequence)
	require.NoError(e.t, err)
	return ack.Sequence, msg.Time
}

func (e *backlogEnv) start(p consumer.Logs) *jsReceiver {
	e.t.Helper()
	set := receivertest.NewNopSettings(NewFactory().Type())
	set.Logger = zaptest.NewLogger(e.t, zaptest.Level(zap.WarnLevel))
	r, err := newReceiver(e.cfg, set, p)
	require.NoError(e.t, err)
	require.NoError(e.t, r.Start(context.Background(), e.host))
	return r
}

func (e *backlogEnv) consumerExists(prj, name string) bool {
	_, err := e.js.Consumer(context.Background(), streams.RawStream(prj), name)
	return err == nil
}

// afterMargin waits until a URL set now is set later than the write margin after stored:
// what a user who sets the URL after sending did, not within the same second.
func afterMargin(t *testing.T, stored time.Time) {
	require.Eventually(t, func() bool { return time.Since(stored) > mirror.WriteMargin+100*time.Millisecond }, 10*time.Second, 10*time.Millisecond)
}

func agentURL(prj string, version int64, since time.Time) mirror.Project {
	return mirror.Project{ID: prj, Version: version, AgentSince: since,
		Pipeline: mirror.Pipeline{AgentEndpointURL: "https://agent.example.com/"}}
}

// A project that gets an agent URL does not send what it stored
// before to the agent; the next record goes.
func TestSettingAnAgentURLDoesNotSendTheStoredRecords(t *testing.T) {
	const prj = "prj_newurl"
	e := newBacklogEnv(t, prj)
	e.put(mirror.Project{ID: prj, Version: 1})
	p := &recorder{}
	r := e.start(p)
	defer func() { require.NoError(t, r.Shutdown(context.Background())) }()

	stored, at := e.publish(prj, 25)
	afterMargin(t, at)
	set := time.Now()
	e.put(agentURL(prj, 2, set))
	require.Eventually(t, func() bool { return e.consumerExists(prj, e.cfg.Durable) }, 10*time.Second, 10*time.Millisecond)
	next, _ := e.publish(prj, 1)
	require.Eventually(t, func() bool { return p.saw(next) }, 10*time.Second, 10*time.Millisecond, "the record sent after the URL was set is processed")
	assert.Never(t, func() bool { return slices.ContainsFunc(p.seqs(), func(s uint64) bool { return s <= stored }) },
		5*time.Second-time.Since(set), 50*time.Millisecond, "no stored record reaches the pipeline within 5 s of setting the URL")
	assert.Equal(t, []uint64{next}, p.seqs())
}

// The control plane records the raw stream's last sequence when it saves the URL: what
// was stored right before the save (within the clock rule's margin) is not sent, the
// next record is.
func TestRecordsStoredRightBeforeTheAgentURLAreNotSent(t *testing.T) {
	const prj = "prj_sequrl"
	e := newBacklogEnv(t, prj)
	e.put(mirror.Project{ID: prj, Version: 1})
	p := &recorder{}
	r := e.start(p)
	defer func() { require.NoError(t, r.Shutdown(context.Background())) }()

	stored, _ := e.publish(prj, 25)
	set := time.Now()
	withURL := agentURL(prj, 2, set)
	withURL.AgentSinceSeq = stored
	e.put(withURL)
	require.Eventually(t, func() bool { return e.consumerExists(prj, e.cfg.Durable) }, 10*time.Second, 10*time.Millisecond)
	next, _ := e.publish(prj, 1)
	require.Eventually(t, func() bool { return p.saw(next) }, 10*time.Second, 10*time.Millisecond, "the record sent after the URL was set is processed")
	assert.Never(t, func() bool { return slices.ContainsFunc(p.seqs(), func(s uint64) bool { return s <= stored }) },
		5*time.Second-time.Since(set), 50*time.Millisecond, "no stored record reaches the pipeline within 5 s of setting the URL")
	assert.Equal(t, []uint64{next}, p.seqs())
}

// A sequence that names another stream's records (NATS was wiped after the URL was set:
// the stream numbers from 1 again) is not used; the time rule is. The stream holds
// records stored since the URL was set, before any pipeline process ran.
func TestAnAgentSinceSeqOfAnotherStreamFallsBackToTheTime(t *testing.T) {
	for name, c := range map[string]struct {
		seq uint64
		ago time.Duration // when the URL was set: after the stream's creation, or before
	}{
		"the stream does not reach it":         {seq: 1000},
		"the stream was created after the URL": {seq: 2, ago: time.Hour},
	} {
		t.Run(name, func(t *testing.T) {
			prj := "prj_seqwiped_" + fmt.Sprint(c.seq)
			e := newBacklogEnv(t, prj)
			withURL := agentURL(prj, 1, time.Now().Add(-c.ago))
			withURL.AgentSinceSeq = c.seq
			e.put(withURL)
			last, _ := e.publish(prj, 5)
			p := &recorder{}
			r := e.start(p)
			defer func() { require.NoError(t, r.Shutdown(context.Background())) }()
			require.Eventually(t, func() bool { return len(p.seqs()) >= 5 }, 10*time.Second, 10*time.Millisecond,
				"records stored after the URL was set are processed, though the recorded sequence says otherwise")
			assert.Equal(t, seqRange(1, last), p.seqs())
		})
	}
}

// Removing the URL deletes the pipeline's consumer, so setting it again does not send
// what was stored while there was none.
func TestSettingAnAgentURLAgainDoesNotSendWhatCameWhileItWasRemoved(t *testing.T) {
	const prj = "prj_urlagain"
	e := newBacklogEnv(t, prj)
	e.put(agentURL(prj, 1, time.Now()))
	p := &recorder{}
	r := e.start(p)
	defer func() { require.NoError(t, r.Shutdown(context.Background())) }()
	require.Eventually(t, func() bool { return e.consumerExists(prj, e.cfg.Durable) }, 10*time.Second, 10*time.Millisecond)
	first, _ := e.publish(prj, 1)
	require.Eventually(t, func() bool { return p.saw(first) }, 10*time.Second, 10*time.Millisecond)

	e.put(mirror.Project{ID: prj, Version: 2})
	require.Eventually(t, func() bool { return !e.consumerExists(prj, e.cfg.Durable) }, 10*time.Second, 10*time.Millisecond,
		"the pipeline consumer of a project without an agent URL is deleted")
	between, at := e.publish(prj, 5)
	afterMargin(t, at)
	set := time.Now()
	e.put(agentURL(prj, 3, set))
	require.Eventually(t, func() bool { return e.consumerExists(prj, e.cfg.Durable) }, 10*time.Second, 10*time.Millisecond)
	next, _ := e.publish(prj, 1)
	require.Eventually(t, func() bool { return p.saw(next) }, 10*time.Second, 10*time.Millisecond)
	assert.Never(t, func() bool {
		return slices.ContainsFunc(p.seqs(), func(s uint64) bool { return s > first && s <= between })
	},
		5*time.Second-time.Since(set), 50*time.Millisecond)
	assert.Equal(t, []uint64{first, next}, p.seqs())
}

// A pipeline process that was down while the URL was removed and set again finds the old
// consumer; it predates the URL, so it starts again from when the URL was set.
func TestAConsumerOlderThanTheAgentURLStartsAgain(t *testing.T) {
	const prj = "prj_urlstale"
	e := newBacklogEnv(t, prj)
	e.put(agentURL(prj, 1, time.Now()))
	p := &recorder{}
	r := e.start(p)
	require.Eventually(t, func() bool { return e.consumerExists(prj, e.cfg.Durable) }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, r.Shutdown(context.Background()))

	between, at := e.publish(prj, 5) // while the URL was off, and the process down
	afterMargin(t, at)
	e.put(agentURL(prj, 3, time.Now()))
	p2 := &recorder{}
	r2 := e.start(p2)
	defer func() { require.NoError(t, r2.Shutdown(context.Background())) }()
	next, _ := e.publish(prj, 1)
	require.Eventually(t, func() bool { return p2.saw(next) }, 10*time.Second, 10*time.Millisecond)
	assert.Never(t, func() bool { return slices.ContainsFunc(p2.seqs(), func(s uint64) bool { return s <= between }) },
		2*time.Second, 50*time.Millisecond)
	assert.Equal(t, []uint64{next}, p2.seqs())
}

// The same without waiting: the old consumer was created within the clock's margin
// before the URL was set again, so only the sequence tells it is an earlier URL's.
func TestAConsumerOlderThanTheAgentURLStartsAgainBySequence(t *testing.T) {
	const prj = "prj_urlstale_seq"
	e := newBacklogEnv(t, prj)
	e.put(agentURL(prj, 1, time.Now()))
	p := &recorder{}
	r := e.start(p)
	require.Eventually(t, func() bool { return e.consumerExists(prj, e.cfg.Durable) }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, r.Shutdown(context.Background()))

	between, _ := e.publish(prj, 5) // while the URL was off, and the process down
	again := agentURL(prj, 3, time.Now())
	again.AgentSinceSeq = between
	e.put(again)
	p2 := &recorder{}
	r2 := e.start(p2)
	next, _ := e.publish(prj, 1)
	require.Eventually(t, func() bool { return p2.saw(next) }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, []uint64{next}, p2.seqs())
	require.NoError(t, r2.Shutdown(context.Background()))

	// The consumer of this URL is kept by the next process: nothing is taken twice.
	p3 := &recorder{}
	r3 := e.start(p3)
	defer func() { require.NoError(t, r3.Shutdown(context.Background())) }()
	last, _ := e.publish(prj, 1)
	require.Eventually(t, func() bool { return p3.saw(last) }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, []uint64{last}, p3.seqs())
}

func backlogState(t *testing.T, js jetstream.JetStream, prj, id string) (validation.BacklogState, bool) {
	kv, err := js.KeyValue(context.Background(), validation.BacklogsBucket)
	if err != nil {
		return validation.BacklogState{}, false
	}
	e, err := kv.Get(context.Background(), validation.BacklogKey(prj, id))
	if err != nil {
		return validation.BacklogState{}, false
	}
	var st validation.BacklogState
	require.NoError(t, json.Unmarshal(e.Value(), &st))
	return st, true
}

func seqRange(a, b uint64) []uint64 {
	var out []uint64
	for s := a; s <= b; s++ {
		out = append(out, s)
	}
	return out
}

// finished reports whether the receiver's run of the project's backlog has returned.
func finished(r *jsReceiver, prj string) bool {
	r.mu.Lock()
	run, ok := r.backlogs[prj]
	r.mu.Unlock()
	if !ok {
		return false
	}
	select {
	case <-run.done:
		return true
	default:
		return false
	}
}

// A backlog processes exactly its range, once, in one batch of the preview's size, says
// so in svc-backlogs, deletes its consumer, and is not run again after a restart.
func TestABacklogProcessesItsRangeOnce(t *testing.T) {
	const prj, id = "prj_backlog", "bl_once1"
	e := newBacklogEnv(t, prj)
	_, at := e.publish(prj, 25)
	afterMargin(t, at)
	// An entry without agent_since: its consumer starts from when it was written.
	e.put(agentURL(prj, 1, time.Time{}))
	p := &recorder{}
	r := e.start(p)
	require.Eventually(t, func() bool { return e.consumerExists(prj, e.cfg.Durable) }, 10*time.Second, 10*time.Millisecond)

	b := agentURL(prj, 2, time.Time{})
	b.Backlog = &mirror.Backlog{ID: id, FirstSeq: 3, LastSeq: 22, Records: 20, RequestedAt: time.Now(), RequestedBy: "usr_1"}
	e.put(b)
	require.Eventually(t, func() bool {
		st, ok := backlogState(t, e.js, prj, id)
		return ok && st.State == validation.BacklogDone
	}, 20*time.Second, 20*time.Millisecond)
	st, _ := backlogState(t, e.js, prj, id)
	assert.Equal(t, validation.BacklogState{ID: id, State: validation.BacklogDone, Processed: 20, FirstSeq: 3, LastSeq: 22, UpdatedAt: st.UpdatedAt}, st)
	assert.Equal(t, [][]uint64{seqRange(3, 22)}, p.handled(), "records 3..22 once, as one batch; none of the live consumer's")
	require.Eventually(t, func() bool { return !e.consumerExists(prj, e.cfg.Durable+"-backlog-"+id) }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, r.Shutdown(context.Background()))

	// Restarted with the backlog still in the mirror: it is not run again.
	p2 := &recorder{}
	r2 := e.start(p2)
	defer func() { require.NoError(t, r2.Shutdown(context.Background())) }()
	require.Eventually(t, func() bool { return finished(r2, prj) }, 10*time.Second, 10*time.Millisecond)
	assert.Empty(t, p2.handled())
	assert.False(t, e.consumerExists(prj, e.cfg.Durable+"-backlog-"+id))
	st2, _ := backlogState(t, e.js, prj, id)
	assert.Equal(t, st, st2)
}

// A pipeline process stopped in the middle of a backlog: the next one resumes it, and
// each record is handled once, the interrupted batch (redelivered) included.
func TestABacklogSurvivesARestartMidRun(t *testing.T) {
	const prj, id = "prj_backlog_restart", "bl_restart1"
	n := 2*validation.BacklogBatchRecords + 500
	e := newBacklogEnv(t, prj)
	_, at := e.publish(prj, n)
	afterMargin(t, at)
	e.put(agentURL(prj, 1, time.Time{}))
	p := &recorder{block: uint64(validation.BacklogBatchRecords + 1), blocked: make(chan struct{})}
	r := e.start(p)
	b := agentURL(prj, 2, time.Time{})
	b.Backlog = &mirror.Backlog{ID: id, FirstSeq: 1, LastSeq: uint64(n)}
	e.put(b)
	select {
	case <-p.blocked:
	case <-time.After(30 * time.Second):
		t.Fatal("the backlog's second batch never reached the pipeline")
	}
	require.NoError(t, r.Shutdown(context.Background()))
	st, ok := backlogState(t, e.js, prj, id)
	require.True(t, ok)
	assert.Equal(t, validation.BacklogRunning, st.State)

	p2 := &recorder{}
	r2 := e.start(p2)
	defer func() { require.NoError(t, r2.Shutdown(context.Background())) }()
	require.Eventually(t, func() bool {
		st, ok := backlogState(t, e.js, prj, id)
		return ok && st.State == validation.BacklogDone
	}, 60*time.Second, 20*time.Millisecond)
	k := uint64(validation.BacklogBatchRecords)
	assert.Equal(t, [][]uint64{seqRange(1, k)}, p.handled())
	// The interrupted batch comes back after retry_delay, so the last may go first.
	assert.ElementsMatch(t, [][]uint64{seqRange(k+1, 2*k), seqRange(2*k+1, uint64(n))}, p2.handled(),
		"the interrupted batch again, whole, and the rest")
	st, _ = backlogState(t, e.js, prj, id)
	assert.Equal(t, n, st.Processed)
}

// A backlog of a paused project (its pipeline does not compile) waits; none of its
// records reach the pipeline.
func TestABacklogOfAPausedProjectDoesNotRun(t *testing.T) {
	const prj, id = "prj_backlog_paused", "bl_paused1"
	e := newBacklogEnv(t, prj)
	e.publish(prj, 5)
	b := agentURL(prj, 1, time.Time{})
	b.Pipeline.Trigger = `severity_number >=`
	b.Backlog = &mirror.Backlog{ID: id, FirstSeq: 1, LastSeq: 5}
	e.put(b)
	p := &recorder{}
	r := e.start(p)
	defer func() { require.NoError(t, r.Shutdown(context.Background())) }()
	require.Eventually(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		_, paused := r.paused[prj]
		return paused
	}, 10*time.Second, 10*time.Millisecond)
	r.mu.Lock()
	_, running := r.backlogs[prj]
	r.mu.Unlock()
	assert.False(t, running)
	_, reported := backlogState(t, e.js, prj, id)
	assert.False(t, reported)
	assert.Empty(t, p.handled())
}

// Removing the agent URL stops a running backlog: it is reported failed, its consumer
// deleted, and setting the URL again does not run it again.
func TestABacklogStopsWhenTheAgentURLIsRemoved(t *testing.T) {
	const prj, id = "prj_backlog_stop", "bl_stop1"
	e := newBacklogEnv(t, prj)
	_, at := e.publish(prj, 10)
	afterMargin(t, at)
	p := &recorder{block: 1, blocked: make(chan struct{})}
	b := agentURL(prj, 1, time.Time{})
	b.Backlog = &mirror.Backlog{ID: id, FirstSeq: 1, LastSeq: 10}
	e.put(b)
	r := e.start(p)
	defer func() { require.NoError(t, r.Shutdown(context.Background())) }()
	select {
	case <-p.blocked:
	case <-time.After(30 * time.Second):
		t.Fatal("the backlog never reached the pipeline")
	}
	off := mirror.Project{ID: prj, Version: 2, Backlog: b.Backlog}
	e.put(off)
	require.Eventually(t, func() bool {
		st, ok := backlogState(t, e.js, prj, id)
		return ok && st.State == validation.BacklogFailed
	}, 20*time.Second, 20*time.Millisecond)
	st, _ := backlogState(t, e.js, prj, id)
	assert.Equal(t, "stopped: the project's agent URL was removed", st.Error)
	assert.False(t, e.consumerExists(prj, e.cfg.Durable+"-backlog-"+id))

	on := agentURL(prj, 3, time.Now())
	on.Backlog = b.Backlog
	e.put(on)
	require.Eventually(t, func() bool { return finished(r, prj) }, 10*time.Second, 10*time.Millisecond)
	assert.Empty(t, p.handled(), "a failed backlog is not run again")
	p.mu.Lock()
	assert.Equal(t, 1, p.entered, "the interrupted batch was not handed on again")
	p.mu.Unlock()
	assert.False(t, e.consumerExists(prj, e.cfg.Durable+"-backlog-"+id))
}

// An entry without agent_since (an older control plane's) starts its consumer from when
// it was written: records stored after it, before any pipeline process ran (an outage),
// are taken; none from before.
func TestAnEntryWithoutAgentSinceStartsWhenItWasWritten(t *testing.T) {
	const prj = "prj_written"
	e := newBacklogEnv(t, prj)
	before, at := e.publish(prj, 3)
	afterMargin(t, at)
	e.put(agentURL(prj, 1, time.Time{}))
	after, _ := e.publish(prj, 3)
	p := &recorder{}
	r := e.start(p)
	defer func() { require.NoError(t, r.Shutdown(context.Background())) }()
	require.Eventually(t, func() bool { return len(p.seqs()) >= 3 }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, seqRange(before+1, after), p.seqs())
}

// A project paused from the start (its pipeline does not compile) still gets its cursor
// when it gets its URL: fixed later, it processes what arrived while it was paused.
func TestAPausedProjectKeepsWhatArrivesUntilItIsFixed(t *testing.T) {
	const prj = "prj_paused_cursor"
	e := newBacklogEnv(t, prj)
	broken := agentURL(prj, 1, time.Time{})
	broken.Pipeline.Trigger = `n ==`
	e.put(broken)
	p := &recorder{}
	r := e.start(p)
	defer func() { require.NoError(t, r.Shutdown(context.Background())) }()
	require.Eventually(t, func() bool { return e.consumerExists(prj, e.cfg.Durable) }, 10*time.Second, 10*time.Millisecond)
	last, at := e.publish(prj, 2)
	afterMargin(t, at)
	assert.Empty(t, p.handled(), "nothing is consumed while paused")
	e.put(agentURL(prj, 2, time.Time{}))
	require.Eventually(t, func() bool { return len(p.seqs()) == 2 }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, seqRange(last-1, last), p.seqs())
}
