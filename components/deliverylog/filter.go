package deliverylog

import (
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// Filter selects deliveries in List.
type Filter struct {
	State string
	Kind  string
	Since time.Time
	Limit int
}

// Limits on List.
const (
	DefaultLimit = 50
	MaxLimit     = 500
)

func (f Filter) normalized() Filter {
	if f.Limit <= 0 {
		f.Limit = DefaultLimit
	}
	if f.Limit > MaxLimit {
		f.Limit = MaxLimit
	}
	return f
}

func (f Filter) match(d Delivery) bool {
	return (f.State == "" || d.State == f.State) && (f.Kind == "" || d.Kind == f.Kind) &&
		(f.Since.IsZero() || !d.CreatedAt.Before(f.Since))
}

// ParseFilter reads the console's query (state, kind, since RFC 3339, limit).
func ParseFilter(q url.Values) (Filter, error) {
	var f Filter
	switch s := q.Get("state"); s {
	case "", StatePending, StateRetrying, StateDelivered, StateDeadLettered:
		f.State = s
	default:
		return f, fmt.Errorf("state: must be pending, retrying, delivered or dead_lettered")
	}
	switch k := q.Get("kind"); k {
	case "", KindAgent, KindSink:
		f.Kind = k
	default:
		return f, fmt.Errorf("kind: must be agent or sink")
	}
	if s := q.Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return f, fmt.Errorf("since: must be an RFC 3339 time")
		}
		f.Since = t
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxLimit {
			return f, fmt.Errorf("limit: must be 1 to %d", MaxLimit)
		}
		f.Limit = n
	}
	return f.normalized(), nil
}
