package streams

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A flush writes what was added; what fails to write is there for the next flush, with
// what was added to the same key while the flush ran, and nothing is counted twice.
func TestFlushPendingKeepsWhatFailed(t *testing.T) {
	var mu sync.Mutex
	pending := map[string]int{"ok": 1, "fails": 2}
	stored := map[string]int{}
	down := errors.New("bucket unreachable")
	write := func(k string, n int) error {
		if k == "fails" {
			// Added while the flush runs, after it took the batch.
			mu.Lock()
			pending["fails"] += 10
			pending["new"] += 5
			mu.Unlock()
			return down
		}
		stored[k] += n
		return nil
	}
	sum := func(failed, newer int) int { return failed + newer }

	require.ErrorIs(t, FlushPending(&mu, &pending, write, sum), down)
	assert.Equal(t, map[string]int{"ok": 1}, stored)
	assert.Equal(t, map[string]int{"fails": 12, "new": 5}, pending)

	write = func(k string, n int) error { stored[k] += n; return nil }
	require.NoError(t, FlushPending(&mu, &pending, write, sum))
	assert.Equal(t, map[string]int{"ok": 1, "fails": 12, "new": 5}, stored)
	assert.Empty(t, pending)
	require.NoError(t, FlushPending(&mu, &pending, write, sum), "nothing to flush")
}
