package pipelineeval

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/ottlevent"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinecfg"
)

// Steps of incident mode, as errors name them.
const (
	StepFingerprint = "fingerprint"
	StepResolveWhen = "resolve_when"
)

// MaxFingerprintBytes bounds a fingerprint's value: it names an incident in keys,
// titles and chat messages, and a tenant's expression may yield a whole record. A
// longer value is cut and keeps a hash of the whole, so two long fingerprints that
// differ only past the cut still name two incidents.
const MaxFingerprintBytes = 256

// fingerprintKeep is how much of a long fingerprint is kept before its hash: the cut,
// "…" and 32 hex digits fit MaxFingerprintBytes.
const fingerprintKeep = MaxFingerprintBytes - len("…") - 32

// IncidentResult is one record's incident-mode evaluation.
type IncidentResult struct {
	// Skipped: the record could not be decoded or transformed (Step, Err): it neither
	// joins, resolves, nor is context. TooLarge when a transform grew it past the
	// record limit: it is dead-lettered as stored with TooLargeReason(Err).
	Skipped  bool
	TooLarge bool
	Step     string
	Err      error
	// Body is the record after its transforms, as calls carry it.
	Body []byte
	// Title is what an incident this record opens is called (IncidentTitle); set for
	// matched records only.
	Title string
	// Matched: the trigger matched, so the record opens or joins its fingerprint's
	// incident (TriggerErr: it could not be evaluated, which is no match).
	Matched    bool
	TriggerErr error
	// Fingerprint is the value of the pipeline's fingerprint: "" without one, or for a
	// record without its field (FingerprintErr: it could not be evaluated), at most
	// MaxFingerprintBytes. Set for records that match, resolve or are context.
	Fingerprint    string
	FingerprintErr error
	// Resolves: resolve_when matched, so the record resolves the open incident of its
	// fingerprint (ResolveErr: it could not be evaluated, which is no match).
	Resolves   bool
	ResolveErr error
	// InContext: the record passed the context filter (FilterErr: it could not be
	// evaluated, which is no pass), so it is context for its fingerprint's calls. The
	// evaluator stores nothing: the incident processor keeps it.
	InContext bool
	FilterErr error
}

// Incident evaluates one record in incident mode: its transforms, then the trigger,
// resolve_when, the context filter and, for a record any of them keeps, its
// fingerprint. It reads and writes no store (incident mode has no cooldowns: an
// incident's calls are paced by group_interval, in the incident store), so its only
// error is the context's.
//
// Most records neither match the trigger nor resolve, and are context at most: without
// transforms, and with expressions over named fields, only those fields are decoded
// (incidentReads), and a record's body goes on as stored.
func (e *Evaluator) Incident(ctx context.Context, _ string, c *pipelinecfg.Compiled, it Item) (IncidentResult, error) {
	if err := ctx.Err(); err != nil {
		return IncidentResult{}, err
	}
	res := IncidentResult{Body: it.Body}
	if c.Transforms == nil && c.Trigger.String() == "" && c.ContextFilter.String() == "" && c.Fingerprint == nil && c.ResolveWhen == nil {
		// Every record joins the project's one incident, as it is: no need to decode it.
		res.Matched, res.InContext = true, true
		return res, nil
	}
	var rec *ottlevent.Record
	var err error
	if reads := e.incidentReads(c); reads != nil {
		// Decoded in part only to evaluate, so into a scratch record: what the result
		// keeps of it (the fingerprint) is a string of its own.
		scratch, _ := partialRecords.Get().(*ottlevent.Record)
		defer func() {
			if scratch != nil {
				partialRecords.Put(scratch)
			}
		}()
		rec, err = ottlevent.DecodeRecordReadsInto(scratch, it.Body, it.Signal, reads)
		if rec != nil {
			scratch = rec
		}
	} else {
		rec, err = ottlevent.DecodeRecord(it.Body, it.Signal)
	}
	if err != nil {
		return IncidentResult{Skipped: true, Step: StepRecord, Err: err}, nil
	}
	rec.SetMaxBytes(e.o.MaxRecordBytes)
	if c.Transforms != nil {
		if err := c.Transforms.Apply(ctx, rec); err != nil {
			return IncidentResult{Skipped: true, TooLarge: errors.Is(err, ottlevent.ErrRecordTooLarge), Step: StepTransforms, Err: err}, nil
		}
		if rec.Changed() {
			res.Body = rec.AppendJSON(nil)
		}
	}
	if res.Matched, res.TriggerErr = c.Trigger.Match(ctx, rec); res.TriggerErr != nil {
		res.Matched = false
	}
	if c.ResolveWhen != nil {
		if res.Resolves, res.ResolveErr = c.ResolveWhen.Match(ctx, rec); res.ResolveErr != nil {
			res.Resolves = false
		}
	}
	if res.InContext, res.FilterErr = c.ContextFilter.Match(ctx, rec); res.FilterErr != nil {
		res.InContext = false
	}
	if c.Fingerprint != nil && (res.Matched || res.Resolves || res.InContext) {
		fp, err := c.Fingerprint.String(ctx, rec)
		if err != nil {
			res.FingerprintErr = err // as a group key: a record without the field shares ""
		}
		res.Fingerprint = boundFingerprint(fp)
	}
	if res.Matched {
		res.Title = IncidentTitle(res.Body, it.Signal, res.Fingerprint)
	}
	return res, nil
}

// incidentReads is what c's four expressions read of a record, down to the keys of
// objects (a fingerprint over resource_attributes["service.name"] decodes one resource
// attribute, not all of them); nil when a record is decoded whole (c.IncidentFields is
// nil: transforms run first, or an expression reads the whole record). It is worked
// out once per compiled pipeline, not per record.
func (e *Evaluator) incidentReads(c *pipelinecfg.Compiled) *ottlevent.ReadSet {
	if c.IncidentFields == nil {
		return nil
	}
	if r := e.reads.Load(); r != nil && r.c == c {
		return r.set
	}
	set := &ottlevent.ReadSet{}
	sets := []func() (*ottlevent.ReadSet, bool){c.Trigger.ReadSet, c.ContextFilter.ReadSet}
	if c.Fingerprint != nil {
		sets = append(sets, c.Fingerprint.ReadSet)
	}
	if c.ResolveWhen != nil {
		sets = append(sets, c.ResolveWhen.ReadSet)
	}
	for _, f := range sets {
		s, ok := f()
		if !ok {
			return nil // IncidentFields says otherwise: not reached
		}
		set = set.Union(s)
	}
	e.reads.Store(&incidentReads{c: c, set: set})
	return set
}

type incidentReads struct {
	c   *pipelinecfg.Compiled
	set *ottlevent.ReadSet
}

// titleFields are the top-level fields a title is taken from, in order: what a record
// says happened (an event's title or summary, a log's message or body, a span's name, a
// push source's text: an alert's summary), then what kind of event it is.
var titleFields = []string{"title", "summary", "message", "msg", "body", "name", "text", "_event_type"}

var titleFieldSet = func() map[string]bool {
	m := map[string]bool{}
	for _, f := range titleFields {
		m[f] = true
	}
	return m
}()

// maxTitleBytes bounds a title taken from a record: the incident store cuts it further.
const maxTitleBytes = 1024

// IncidentTitle names the incident a record opens: the first of its title, summary,
// message, msg, body, name, text and _event_type that is a non-empty string, else its
// fingerprint ("" when it has neither: the incident store then names it). The
// incident processor and the dry run both take titles from here.
func IncidentTitle(body []byte, signal, fingerprint string) string {
	rec, err := ottlevent.DecodeRecordFields(body, signal, titleFieldSet)
	if err == nil {
		m := rec.Map()
		for _, f := range titleFields {
			if v, ok := m.Get(f); ok && v.Type() == pcommon.ValueTypeStr {
				if t := strings.TrimSpace(v.Str()); t != "" {
					if len(t) > maxTitleBytes {
						t = strings.ToValidUTF8(t[:maxTitleBytes], "")
					}
					return t
				}
			}
		}
	}
	return fingerprint
}

// boundFingerprint cuts a fingerprint past MaxFingerprintBytes, keeping its start
// readable and a hash of all of it.
func boundFingerprint(fp string) string {
	if len(fp) <= MaxFingerprintBytes {
		return fp
	}
	h := sha256.Sum256([]byte(fp))
	return strings.ToValidUTF8(fp[:fingerprintKeep], "") + "…" + hex.EncodeToString(h[:16])
}
