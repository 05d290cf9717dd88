package pipelineeval

import (
	"context"
	"time"
)

// MemoryWindows holds a trial's windows: the records that passed the context filter,
// in the order they came, kept for the whole trial (a trial's records are bounded; its
// windows are bounded by Bytes, which its caller checks). It reads no live store, so a
// trial's windows are of its own records only.
type MemoryWindows struct {
	groups map[string][]memKept
	// Bytes is what the windows hold.
	Bytes int
}

type memKept struct {
	t    time.Time
	body []byte
}

// NewMemoryWindows returns empty windows.
func NewMemoryWindows() *MemoryWindows { return &MemoryWindows{groups: map[string][]memKept{}} }

// Add keeps rec in group's window at t. A trial sees each record once and has one
// project, so neither seq nor project nor ttl is needed: Window reads by time.
func (m *MemoryWindows) Add(_ context.Context, _, group string, _ uint64, rec []byte, t time.Time, _ time.Duration) error {
	m.groups[group] = append(m.groups[group], memKept{t: t, body: rec})
	m.Bytes += len(rec)
	return nil
}

// Window returns the newest max records of group kept at or after since, oldest first,
// and how many it holds since then.
func (m *MemoryWindows) Window(_ context.Context, _, group string, since time.Time, max int) ([][]byte, int, error) {
	var window [][]byte
	for _, k := range m.groups[group] {
		if !k.t.Before(since) {
			window = append(window, k.body)
		}
	}
	total := len(window)
	if total > max {
		window = window[total-max:]
	}
	return window, total, nil
}
