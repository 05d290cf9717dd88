package agentexporter

import (
	"context"
	"fmt"
	"sync"

	"github.com/otelcol-svc/otelcol-svc/components/mirror"
)

// maxGroupsInFlight bounds how many groups of one batch are being delivered at once: a
// storm across many groups then costs at most this many requests in flight per project
// and batch, while one slow group still leaves the others room to go ahead.
const maxGroupsInFlight = 8

// sendCalls delivers a batch's calls: the calls of one group one after the other, in the
// batch's order, and different groups side by side, so a group whose call is being
// retried holds up only its own later calls. Legacy calls have no group: they keep one
// order, as before. It returns once every group has settled. A group whose call must be
// made again later stops there (its later calls would overtake it) and fails the batch,
// which is redelivered whole: calls already delivered are sent again (at least once).
func (e *agentExporter) sendCalls(ctx context.Context, proj mirror.Project, calls []call) error {
	groups := groupCalls(calls)
	if len(groups) == 1 {
		return e.sendGroup(ctx, proj, groups[0])
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		first  error
		failed int
		slots  = make(chan struct{}, maxGroupsInFlight)
	)
	for _, g := range groups {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			if err := e.sendGroup(ctx, proj, g); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				failed++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if failed > 1 {
		// One reason is enough for the log; a shutdown would otherwise repeat it per group.
		return fmt.Errorf("%w (and %d other groups' calls)", first, failed-1)
	}
	return first
}

// sendGroup makes one group's calls in order, stopping at the first that is not settled.
func (e *agentExporter) sendGroup(ctx context.Context, proj mirror.Project, calls []call) error {
	for _, c := range calls {
		if err := e.handle(ctx, proj, c); err != nil {
			return err
		}
	}
	return nil
}

// groupCalls splits calls by group, each group in the calls' order, the groups in the
// order of their first call.
func groupCalls(calls []call) [][]call {
	var groups [][]call
	index := map[string]int{}
	for _, c := range calls {
		i, ok := index[c.group]
		if !ok {
			i = len(groups)
			index[c.group] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], c)
	}
	return groups
}
