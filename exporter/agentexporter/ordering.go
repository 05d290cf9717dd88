package agentexporter

import (
	"context"
	"fmt"
	"sync"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
)

// maxCallsInFlight bounds how many calls of one project are being made at once, across
// its groups and the batches in flight: a storm across many groups then costs at most
// this many requests in flight per project, while one slow group still leaves the others
// room to go ahead.
const maxCallsInFlight = 8

// sendCalls delivers a batch's calls through the project's lanes (one FIFO per group key,
// living across batches): the calls of one group one after the other, in the stream's
// order, and different groups side by side, so a group whose call is being retried holds
// up only its own later calls, in this batch and in the batches after it. Legacy calls
// have no group: they share one lane, so they keep one order, as before.
//
// Once the calls are queued it hands the batch off (internal/pipelinectx): the receiver
// may then start the next batch, whose calls queue behind these. It returns once every
// call of the batch has settled. A call that must be made again later fails the batch,
// which is redelivered whole: calls already delivered are sent again (at least once).
func (e *agentExporter) sendCalls(ctx context.Context, proj mirror.Project, calls []call) error {
	dones := e.lanes.enqueue(ctx, proj, calls)
	pipelinectx.Handoff(ctx)
	var (
		first  error
		failed = map[string]bool{}
	)
	for i, done := range dones {
		if err := <-done; err != nil {
			if first == nil {
				first = err
			}
			failed[calls[i].group] = true
		}
	}
	if len(failed) > 1 {
		// One reason is enough for the log; a shutdown would otherwise repeat it per group.
		return fmt.Errorf("%w (and %d other groups' calls)", first, len(failed)-1)
	}
	return first
}

// lanes holds, per project and group key, the calls queued and not yet settled. Written
// by hand: a keyed set of FIFOs that exist only while they hold calls (group keys are
// unbounded, e.g. pod names), each drained by its own goroutine under a per-project bound.
type lanes struct {
	e  *agentExporter
	mu sync.Mutex
	// byKey has a lane only while it has calls queued or one being made.
	byKey map[laneKey]*lane
	// slots bound each project's calls in flight; a project's entry lives while it has lanes.
	slots map[string]*projectSlots
}

type laneKey struct{ project, group string }

type lane struct {
	queue []*queuedCall
	// failed is the error of a call of this lane that was not settled: the calls queued
	// behind it fail too rather than overtake it (it is redelivered with its batch).
	failed error
}

type projectSlots struct {
	ch    chan struct{}
	lanes int
}

type queuedCall struct {
	ctx  context.Context // the batch's: its outcome, its cancellation
	proj mirror.Project
	c    call
	done chan error
}

func newLanes(e *agentExporter) *lanes {
	return &lanes{e: e, byKey: map[laneKey]*lane{}, slots: map[string]*projectSlots{}}
}

// enqueue puts calls at the back of their lanes, all under one lock so that a later
// batch's calls of a group always queue behind an earlier batch's. Each call's channel
// receives its result once.
func (ls *lanes) enqueue(ctx context.Context, proj mirror.Project, calls []call) []<-chan error {
	dones := make([]<-chan error, len(calls))
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for i, c := range calls {
		q := &queuedCall{ctx: ctx, proj: proj, c: c, done: make(chan error, 1)}
		dones[i] = q.done
		k := laneKey{proj.ID, c.group}
		l, ok := ls.byKey[k]
		if !ok {
			l = &lane{}
			ls.byKey[k] = l
			s, ok := ls.slots[proj.ID]
			if !ok {
				s = &projectSlots{ch: make(chan struct{}, maxCallsInFlight)}
				ls.slots[proj.ID] = s
			}
			s.lanes++
			go ls.drain(k, l, s.ch)
		}
		l.queue = append(l.queue, q)
	}
	return dones
}

// drain makes a lane's calls one after the other until it is empty, then removes it.
func (ls *lanes) drain(k laneKey, l *lane, slots chan struct{}) {
	for {
		ls.mu.Lock()
		if len(l.queue) == 0 {
			delete(ls.byKey, k)
			if s := ls.slots[k.project]; s != nil {
				if s.lanes--; s.lanes == 0 {
					delete(ls.slots, k.project)
				}
			}
			ls.mu.Unlock()
			return
		}
		q := l.queue[0]
		l.queue[0] = nil
		l.queue = l.queue[1:]
		failed := l.failed
		ls.mu.Unlock()
		if failed != nil {
			q.done <- fmt.Errorf("an earlier call of its group was not settled (%w)", failed)
			continue
		}
		err := ls.make(q, slots)
		if err != nil {
			ls.mu.Lock()
			l.failed = err
			ls.mu.Unlock()
		}
		q.done <- err
	}
}

// make makes one call once the project has room for it.
func (ls *lanes) make(q *queuedCall, slots chan struct{}) error {
	select {
	case slots <- struct{}{}:
	case <-q.ctx.Done():
		return fmt.Errorf("call to the agent of project %s not made: %w; the records will be redelivered", q.proj.ID, context.Cause(q.ctx))
	}
	defer func() { <-slots }()
	return ls.e.handle(q.ctx, q.proj, q.c)
}
