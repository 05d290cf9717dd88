package deliverylog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
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

// ReplayRequest is the body of POST .../deliveries/replay: some deliveries by id, or all
// dead-lettered ones (optionally of one kind, since a time).
type ReplayRequest struct {
	IDs   []string
	State string
	Kind  string
	Since time.Time
}

// MaxReplayBody bounds the request body: MaxReplay ids of at most 128 bytes, quoted.
const MaxReplayBody = MaxReplay*132 + 1024

// ParseReplayRequest reads and checks a replay request body.
func ParseReplayRequest(body []byte) (ReplayRequest, error) {
	var in struct {
		IDs   []string `json:"ids"`
		State string   `json:"state"`
		Kind  string   `json:"kind"`
		Since string   `json:"since"`
	}
	var r ReplayRequest
	if len(body) > MaxReplayBody {
		return r, fmt.Errorf("the body is larger than %d bytes", MaxReplayBody)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return r, fmt.Errorf("the body must be a JSON object {\"ids\": [...]} or {\"state\": \"dead_lettered\", \"kind\", \"since\"}: %v", err)
	}
	if dec.More() {
		return r, errors.New("the body must hold one JSON object")
	}
	switch {
	case in.IDs != nil && (in.State != "" || in.Kind != "" || in.Since != ""):
		return r, errors.New("give either ids or state (with kind and since), not both")
	case in.IDs != nil:
		if len(in.IDs) == 0 || len(in.IDs) > MaxReplay {
			return r, fmt.Errorf("ids: give 1 to %d delivery ids", MaxReplay)
		}
		seen := map[string]bool{}
		for _, id := range in.IDs {
			if !validToken(id) {
				return r, fmt.Errorf("ids: %q is not a delivery id", truncate(id, 64))
			}
			if !seen[id] {
				seen[id] = true
				r.IDs = append(r.IDs, id)
			}
		}
		return r, nil
	case in.State == "":
		return r, errors.New("give ids, or state \"dead_lettered\"")
	case in.State != StateDeadLettered:
		return r, errors.New("state: only dead_lettered deliveries are replayed in bulk; give ids for others")
	}
	r.State = in.State
	switch in.Kind {
	case "", KindAgent, KindSink:
		r.Kind = in.Kind
	default:
		return r, errors.New("kind: must be agent or sink")
	}
	if in.Since != "" {
		t, err := time.Parse(time.RFC3339, in.Since)
		if err != nil {
			return r, errors.New("since: must be an RFC 3339 time")
		}
		r.Since = t
	}
	return r, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
