package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/envelope"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/sourcepreset"
	"github.com/otelcol-svc/otelcol-svc/internal/sourceverify"
)

// maxTestHeaders bounds the headers a source test takes: a sender's request has a few
// dozen at most.
const maxTestHeaders = 100

// SourceTestInput is what a source test takes: the settings (an unsaved source, or a
// saved one by id), optionally another preset or verification to try with them, and a
// sample request (its headers and body).
type SourceTestInput struct {
	Source       *SourceSpec       `json:"source,omitempty" jsonschema:"settings of a source not saved yet, as create_source takes them (name optional)"`
	SourceID     string            `json:"source_id,omitempty" jsonschema:"a saved source to test (src_...); or give source instead"`
	Preset       string            `json:"preset,omitempty" jsonschema:"a preset to try instead of the source's (alertmanager, grafana, github, stripe, sentry, pagerduty, cloudevents)"`
	Verification *VerificationSpec `json:"verification,omitempty" jsonschema:"a verification to try instead of the source's, e.g. with the secret you are about to save"`
	Headers      map[string]string `json:"headers,omitempty" jsonschema:"the sample request's headers (name to value), as the sender sent them: the presets read some (X-GitHub-Event, ce-type, ...), and with a verification they are checked (signature, Basic credentials)"`
	URLToken     string            `json:"url_token,omitempty" jsonschema:"url_token verification: the token at the end of the ingest URL the sample was posted to"`
	// Payload is the sample body: a JSON value, used byte for byte as it appears in the
	// request, or a JSON string holding the body exactly as the sender posted it (a
	// signature covers the exact bytes, which a client re-encoding an object would change).
	Payload json.RawMessage `json:"payload"`
}

// SourceTest is the answer of a source test: the record the source would store for the
// sample's first event, every event's record, and whether the request passes the
// source's verification.
type SourceTest struct {
	Envelope     json.RawMessage     `json:"envelope" jsonschema:"the record the source would store: _event_type, _source, timestamp, text, labels, payload"`
	EventType    string              `json:"event_type" jsonschema:"the record's _event_type"`
	Warnings     []string            `json:"warnings" jsonschema:"fields the settings name that the payload lacks or holds in an unusable form; empty when the mapping is complete"`
	Events       []SourceTestEvent   `json:"events" jsonschema:"one entry per record the sample becomes (a preset may read several, e.g. one per alert)"`
	Verification *VerificationResult `json:"verification,omitempty" jsonschema:"whether the receiver would accept the sample request; only when the source has a verification and headers (or url_token) are given"`
}

// SourceTestEvent is one record of a source test.
type SourceTestEvent struct {
	Envelope  json.RawMessage `json:"envelope"`
	EventType string          `json:"event_type"`
	Warnings  []string        `json:"warnings"`
}

// VerificationResult says whether a sample request passes a source's verification.
type VerificationResult struct {
	OK      bool   `json:"ok" jsonschema:"true when the receiver would accept the request"`
	Message string `json:"message" jsonschema:"what the receiver would answer, or what to fix"`
}

// TestSource builds the records of a sample request with an unsaved source or a saved
// one, for any member. Nothing is stored or published.
func (s *Service) TestSource(ctx context.Context, userID, id string, in SourceTestInput) (res SourceTest, err error) {
	err = s.InProject(ctx, userID, id, Read, func(ctx context.Context, tx *store.Tx, p store.Project, role string, _ *mirror.Store) error {
		res, err = testSource(ctx, tx, p, in, role != store.RoleMember)
		return err
	})
	return res, err
}

// testSource: see TestSource.
// mayCheckSaved: the caller may change the source (owner, admin). A member may test a
// saved source's mapping but not check a sample's signature, credentials or token against
// its saved secret: that would let them try guesses against a secret they may not see.
func testSource(ctx context.Context, tx *store.Tx, p store.Project, in SourceTestInput, mayCheckSaved bool) (SourceTest, error) {
	var src mirror.Source
	// noSecret: the verification's secret was generated for this test, so no sample can
	// match it; the answer says so rather than call a genuine request forged.
	noSecret := false
	switch {
	case in.Source != nil && in.SourceID != "":
		return SourceTest{}, BadBody("send either source (settings to try) or source_id (a saved source), not both")
	case in.Source != nil:
		var e *apierror.Error
		if src, noSecret, e = in.Source.validate("source.", false); e != nil {
			return SourceTest{}, e
		}
		src.ProjectID = p.ID
	case in.SourceID != "":
		saved, err := tx.SourceByID(ctx, p.ID, in.SourceID)
		if errors.Is(err, store.ErrNotFound) {
			return SourceTest{}, NotFound("source")
		}
		if err != nil {
			return SourceTest{}, err
		}
		src = saved.Config
	case in.Preset != "" || in.Verification != nil:
		// A preset or verification alone is a source with the defaults.
		src, _, _ = SourceSpec{}.validate("", false)
		src.ProjectID = p.ID
	default:
		return SourceTest{}, BadBody("send source (settings to try) or source_id (a saved source)")
	}
	if in.Preset != "" {
		if !sourcepreset.Valid(in.Preset) {
			return SourceTest{}, BadBody(fmt.Sprintf("preset: %q is not a preset: one of %s", in.Preset, strings.Join(sourcepreset.Names(), ", ")))
		}
		src.Preset = in.Preset
	}
	if in.Verification != nil {
		c, gen, e := in.Verification.config("")
		if e != nil {
			return SourceTest{}, e
		}
		src.Verification, noSecret = &c, gen
	}
	h, e := testHeaders(in.Headers)
	if e != nil {
		return SourceTest{}, e
	}
	body, e := testBody(in.Payload)
	if e != nil {
		return SourceTest{}, e
	}

	now := time.Now().UTC()
	res := SourceTest{Events: []SourceTestEvent{}, Warnings: []string{}}
	if src.Preset == "" {
		if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '{' {
			return SourceTest{}, BadBody("payload must be a JSON object: a sample of what your system posts")
		}
		built, err := envelope.Build(src, body, now)
		if err != nil {
			return SourceTest{}, BadBody("payload: " + err.Error())
		}
		res.Events = append(res.Events, testEvent(built))
	} else {
		evs, err := sourcepreset.Split(src.Preset, h, body, sourcepreset.Limits{})
		if err != nil {
			var pe *sourcepreset.Error
			if errors.As(err, &pe) {
				return SourceTest{}, BadBody("payload: the " + pe.Preset + " preset cannot read it: " + pe.Message)
			}
			return SourceTest{}, BadBody("payload: " + err.Error())
		}
		for _, ev := range evs {
			res.Events = append(res.Events, testEvent(envelope.BuildPreset(src, ev, now)))
		}
	}
	if len(res.Events) > 0 {
		first := res.Events[0]
		res.Envelope, res.EventType, res.Warnings = first.Envelope, first.EventType, first.Warnings
	} else {
		res.Envelope = json.RawMessage("null")
		res.Warnings = []string{"the " + src.Preset + " preset read no events from this payload: nothing would be stored"}
	}

	if src.Verification != nil && (in.Headers != nil || in.URLToken != "") {
		if in.SourceID != "" && in.Verification == nil && !mayCheckSaved {
			res.Verification = &VerificationResult{Message: "only the project's owner and admins can check a sample against the source's saved secret"}
			return res, nil
		}
		res.Verification = verifySample(*src.Verification, noSecret, h, in.URLToken, body, now)
	}
	return res, nil
}

func testEvent(b envelope.Result) SourceTestEvent {
	w := b.Warnings
	if w == nil {
		w = []string{}
	}
	return SourceTestEvent{Envelope: b.Record, EventType: b.EventType, Warnings: w}
}

// verifySample checks a sample request as the receiver would.
func verifySample(c sourceverify.Config, noSecret bool, h http.Header, urlToken string, body []byte, now time.Time) *VerificationResult {
	if noSecret {
		name, _ := secretField(&c)
		return &VerificationResult{Message: fmt.Sprintf("no %s to check the request with: give verification.%s, the one the sender uses (a new source gets a generated one when you leave it out)", name, name)}
	}
	if err := sourceverify.Verify(c, h, urlToken, body, now); err != nil {
		msg := err.Error()
		var ve *sourceverify.Error
		if errors.As(err, &ve) && ve.Reason == sourceverify.ReasonConfig && errors.Unwrap(err) != nil {
			// The owner is the one asking: what is wrong with the settings is theirs to see.
			msg = errors.Unwrap(err).Error()
		}
		return &VerificationResult{Message: msg}
	}
	return &VerificationResult{OK: true, Message: fmt.Sprintf("the request passes the %s verification: the receiver would accept it", c.Scheme)}
}

// testHeaders turns a test's header object into request headers, checked as HTTP would.
func testHeaders(in map[string]string) (http.Header, *apierror.Error) {
	if len(in) > maxTestHeaders {
		return nil, BadBody(fmt.Sprintf("headers: at most %d, not %d", maxTestHeaders, len(in)))
	}
	h := make(http.Header, len(in))
	names := make([]string, 0, len(in))
	for k := range in {
		names = append(names, k)
	}
	sort.Strings(names) // the first bad one named is the same on every call
	for _, k := range names {
		v := in[k]
		if !validHeaderName(k) {
			return nil, BadBody(fmt.Sprintf("headers[%q]: not a valid HTTP header name", k))
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return nil, BadBody(fmt.Sprintf("headers[%q]: a header value cannot hold a line break", k))
		}
		h.Add(k, v)
	}
	return h, nil
}

// testBody is the sample body: a JSON string's text (the body as the sender posted it),
// else the JSON value's own bytes.
func testBody(payload json.RawMessage) ([]byte, *apierror.Error) {
	t := bytes.TrimSpace(payload)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return nil, BadBody("payload is required: a sample of what the sender posts (a JSON value, or a string holding the body exactly as posted)")
	}
	if t[0] != '"' {
		return t, nil
	}
	var raw string
	if err := json.Unmarshal(t, &raw); err != nil {
		return nil, BadBody("payload: " + err.Error())
	}
	return []byte(raw), nil
}
