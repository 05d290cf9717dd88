package validationresponder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/collector/component"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/ottlevent"
	"github.com/otelcol-svc/otelcol-svc/internal/fieldstats"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/internal/validation"
)

// Field warnings: a valid pipeline whose expressions name a field the
// project's records never had (severty_number), or compare a number field with a string
// (severity_number >= "high"), saves and never matches. The check of a project's
// pipeline (validation.CheckProject) therefore also answers warnings, from the field
// catalog of the project's newest records, computed by the Fields view's own code
// (internal/fieldstats), so a warning and the Fields page agree.
//
// The dashboard checks as the user types, so a catalog is kept for catalogTTL per
// project (at most catalogProjects of them), and reading one is bounded: the newest
// catalogRecords records, catalogBytes of them, catalogTime in all. A read that fails or
// runs out of time gives no warnings: they are advice, never a reason to fail a check.
const (
	catalogRecords  = 1000
	catalogBytes    = 8 << 20
	catalogTime     = time.Second
	catalogTTL      = 10 * time.Second
	catalogProjects = 256
)

// A check is answered off the subscription's goroutine, checksAtOnce at a time, so one
// project's slow catalog (large records) does not hold up every tenant's pipeline save
// behind it (validation.Timeout); past that it is answered at once, without warnings.
// The answer waits for warnings at most warningsWait: a catalog not read by then is read
// on in the background (readsAtOnce at a time, one per project) into the cache, and the
// next check has it.
const (
	checksAtOnce = 8
	readsAtOnce  = 4
	warningsWait = 300 * time.Millisecond
)

type checker struct {
	js    jetstream.JetStream
	mu    sync.Mutex
	cache map[string]catalog
	// reading holds the catalog reads in progress, by project: closed when done.
	reading map[string]chan struct{}
	checks  chan struct{}
	reads   chan struct{}
	// read reads a project's newest records (readNewest; tests slow it down).
	read func(ctx context.Context, projectID string, take func([]byte)) error
	// now is the clock of the cache (tests move it).
	now func() time.Time
}

type catalog struct {
	stats *fieldstats.Stats
	at    time.Time
}

func newChecker(js jetstream.JetStream) *checker {
	c := &checker{js: js, cache: map[string]catalog{}, reading: map[string]chan struct{}{},
		checks: make(chan struct{}, checksAtOnce), reads: make(chan struct{}, readsAtOnce), now: time.Now}
	c.read = func(ctx context.Context, projectID string, take func([]byte)) error {
		return readNewest(ctx, c.js, projectID, catalogRecords, catalogBytes, take)
	}
	return c
}

func (c *checker) handle(req micro.Request) {
	select {
	case c.checks <- struct{}{}:
		go func() {
			defer func() { <-c.checks }()
			c.answer(req, true)
		}()
	default:
		c.answer(req, false)
	}
}

func (c *checker) answer(req micro.Request, warn bool) {
	var p mirror.Pipeline
	// Unknown fields are ignored: a newer control plane may send settings this process
	// does not know, and they are not for it to refuse.
	if err := json.Unmarshal(req.Data(), &p); err != nil {
		_ = req.Error("400", "the body is not a pipeline: "+err.Error(), nil)
		return
	}
	res := Check(p)
	if id := req.Headers().Get(validation.HeaderProjectID); warn && res.OK && id != "" && streams.ValidProjectID(id) && c.js != nil {
		res.Warnings = Warnings(p, c.catalog(id, warningsWait))
	}
	_ = req.RespondJSON(res)
}

// catalog returns the project's field statistics, nil when they could not be read
// within wait (the read goes on, and fills the cache for the next check).
func (c *checker) catalog(projectID string, wait time.Duration) *fieldstats.Stats {
	c.mu.Lock()
	if e, ok := c.cache[projectID]; ok && c.now().Sub(e.at) < catalogTTL {
		c.mu.Unlock()
		return e.stats
	}
	done, ok := c.reading[projectID]
	if !ok {
		select {
		case c.reads <- struct{}{}:
		default:
			c.mu.Unlock()
			return nil // enough catalogs being read; this check goes without
		}
		done = make(chan struct{})
		c.reading[projectID] = done
		go c.fill(projectID, done)
	}
	c.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.cache[projectID]; ok {
		return e.stats
	}
	return nil
}

// fill reads the project's catalog into the cache.
func (c *checker) fill(projectID string, done chan struct{}) {
	defer func() {
		c.mu.Lock()
		delete(c.reading, projectID)
		c.mu.Unlock()
		<-c.reads
		close(done)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), catalogTime)
	defer cancel()
	st := fieldstats.New()
	if err := c.read(ctx, projectID, st.Add); err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.cache) >= catalogProjects {
		for id, e := range c.cache {
			if c.now().Sub(e.at) >= catalogTTL || len(c.cache) >= catalogProjects {
				delete(c.cache, id)
			}
		}
	}
	c.cache[projectID] = catalog{stats: st, at: c.now()}
}

// readNewest hands take the project's newest n records (oldest of them first) through
// an ordered consumer (no ack, in memory: the pipeline's consumers see nothing), until
// maxBytes of them were read. A project without a stream has no records.
func readNewest(ctx context.Context, js jetstream.JetStream, projectID string, n uint64, maxBytes int, take func([]byte)) error {
	s, err := js.Stream(ctx, streams.RawStream(projectID))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	st := s.CachedInfo().State
	if st.Msgs == 0 || st.LastSeq < st.FirstSeq {
		return nil
	}
	first := st.FirstSeq
	if st.LastSeq-first+1 > n {
		first = st.LastSeq - n + 1
	}
	oc, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: first,
		InactiveThreshold: time.Minute, MaxResetAttempts: 1,
	})
	if err != nil {
		return err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if ci := oc.CachedInfo(); ci != nil {
			_ = s.DeleteConsumer(dctx, ci.Name)
		}
	}()
	it, err := oc.Messages(jetstream.PullMaxMessagesWithBytesLimit(250, 4<<20))
	if err != nil {
		return err
	}
	defer it.Stop()
	go func() { <-ctx.Done(); it.Stop() }()
	read := 0
	for {
		msg, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) || errors.Is(err, nats.ErrTimeout) {
				return nil
			}
			return err
		}
		md, err := msg.Metadata()
		if err != nil {
			continue
		}
		if read+len(msg.Data()) > maxBytes {
			return nil
		}
		read += len(msg.Data())
		take(msg.Data())
		if md.Sequence.Stream >= st.LastSeq || md.NumPending == 0 {
			return nil
		}
	}
}

// expression is one OTTL field of a pipeline, as Warnings looks at it.
type expression struct {
	field string
	index *int
	kind  string
	text  string
}

func expressions(p mirror.Pipeline) []expression {
	out := []expression{{"trigger", nil, ottlevent.KindCondition, p.Trigger}}
	for i, t := range p.Transforms {
		out = append(out, expression{"transforms", &i, ottlevent.KindStatement, t})
	}
	return append(out,
		expression{"context_filter", nil, ottlevent.KindCondition, p.ContextFilter},
		expression{"group_key", nil, ottlevent.KindValue, p.GroupKey},
		expression{"dedup_key", nil, ottlevent.KindValue, p.DedupKey})
}

// Warnings are a valid pipeline's fields the catalog st never saw, and its comparisons
// of a field with a literal of a type the field never holds. With no catalog, or one of
// no records (a new project), there is nothing to tell: no warning.
func Warnings(p mirror.Pipeline, st *fieldstats.Stats) []validation.Warning {
	if st == nil || st.Sampled() == 0 {
		return nil
	}
	set := component.TelemetrySettings{Logger: zap.NewNop()}
	type found struct {
		expression
		refs []ottlevent.PathRef
	}
	var all []found
	// A field a transform writes (set(event["x"], ...)) exists for the expressions
	// after it even if no stored record has it; it counts as seen everywhere, since the
	// trigger runs after the transforms in window mode and before them in legacy mode.
	var written []string
	for _, e := range expressions(p) {
		refs, err := ottlevent.Paths(e.kind, e.text, set)
		if err != nil {
			continue // the check refused it already, or it names no field
		}
		for _, r := range refs {
			if r.Target {
				written = append(written, r.FieldsPaths()...)
			}
		}
		all = append(all, found{e, refs})
	}
	var out []validation.Warning
	for _, f := range all {
		for _, r := range f.refs {
			if r.Target {
				continue
			}
			w := validation.Warning{Field: f.field, Index: f.index}
			if r.Line > 0 {
				w.Position = &validation.Position{Line: r.Line, Column: r.Column}
			}
			types, seen := lookup(st, r.FieldsPaths())
			switch {
			case !seen && !underAny(r.FieldsPaths(), written) && !st.Truncated():
				w.Message = fmt.Sprintf("no field named %s in the project's last %d records", r.Text, st.Sampled())
				if s := suggest(st, r); s != "" {
					w.Message += fmt.Sprintf("; did you mean %s?", s)
				} else {
					w.Message += "; check the spelling on the Fields page"
				}
			case seen && r.Compared == "string" && only(types, "number"):
				w.Message = fmt.Sprintf("compared with a string, but %s is a number in the project's records: it never matches; write the number without quotes", r.Text)
			case seen && r.Compared == "number" && only(types, "string"):
				w.Message = fmt.Sprintf("compared with a number, but %s is a string in the project's records: it never matches; quote the value, or convert the field with Int() or Double()", r.Text)
			default:
				continue
			}
			out = append(out, w)
		}
	}
	return out
}

func lookup(st *fieldstats.Stats, paths []string) (types []string, seen bool) {
	for _, p := range paths {
		if t, ok := st.Types(p); ok {
			types, seen = append(types, t...), true
		}
	}
	return types, seen
}

// underAny reports a path that is one of written, or inside one.
func underAny(paths, written []string) bool {
	for _, p := range paths {
		for _, w := range written {
			if p == w || strings.HasPrefix(p, w+".") || strings.HasPrefix(p, w+"[]") {
				return true
			}
		}
	}
	return false
}

// only reports that the types seen, null aside, are just t.
func only(types []string, t string) bool {
	n := 0
	for _, x := range types {
		switch x {
		case "null":
		case t:
			n++
		default:
			return false
		}
	}
	return n > 0
}

// suggest is the catalog's field (as OTTL) nearest to what r names, when it is a likely
// misspelling (at most two edits, and a third of the name's length).
func suggest(st *fieldstats.Stats, r ottlevent.PathRef) string {
	want := r.FieldsPaths()
	best, bestD := "", 3
	fields := st.Result()
	sort.Slice(fields, func(i, j int) bool { return fields[i].Count > fields[j].Count })
	for _, f := range fields {
		if f.OTTL == "" {
			continue
		}
		for _, w := range want {
			limit := min(2, len(w)/3)
			for _, name := range []string{f.Path, f.OTTL} {
				if d := editDistance(w, name, limit+1); d <= limit && d < bestD {
					best, bestD = f.OTTL, d
				}
			}
		}
	}
	return best
}

// editDistance is Levenshtein's distance, or max when it is at least that.
func editDistance(a, b string, max int) int {
	if d := len(a) - len(b); d >= max || -d >= max {
		return max
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		low := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			low = min(low, cur[j])
		}
		if low >= max {
			return max
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], max)
}
