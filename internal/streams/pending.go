package streams

import (
	"errors"
	"sync"
)

// FlushPending writes counts kept in memory between flushes: it takes the whole of
// *pending out under mu (so adding goes on while it writes), calls write for each entry,
// and puts back those whose write failed, for the next flush. An entry added again
// meanwhile is combined with the failed one by requeue(failed, newer); no count is lost
// either way. It returns the write errors joined.
func FlushPending[K comparable, V any](mu sync.Locker, pending *map[K]V, write func(K, V) error, requeue func(failed, newer V) V) error {
	mu.Lock()
	batch := *pending
	if len(batch) == 0 {
		mu.Unlock()
		return nil
	}
	*pending = make(map[K]V, len(batch))
	mu.Unlock()
	var errs []error
	for k, v := range batch {
		if err := write(k, v); err != nil {
			errs = append(errs, err)
			mu.Lock()
			if newer, ok := (*pending)[k]; ok {
				v = requeue(v, newer)
			}
			(*pending)[k] = v
			mu.Unlock()
		}
	}
	return errors.Join(errs...)
}
