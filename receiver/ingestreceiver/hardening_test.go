package ingestreceiver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/records"
	"github.com/otelcol-svc/otelcol-svc/internal/eventjson"
	"github.com/otelcol-svc/otelcol-svc/receiver/ingestreceiver/internal/metadata"
)

const otlpLogPrefix = `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":`
const otlpLogSuffix = `}]}]}]}`

// otlpStatus decodes an OTLP/HTTP error answer in JSON.
func otlpStatus(t *testing.T, a answer) *spb.Status {
	t.Helper()
	var st spb.Status
	require.NoError(t, protojson.Unmarshal(a.body, &st), "%s", a.body)
	return &st
}

// JSON text must be UTF-8 and encode characters: invalid UTF-8 and lone surrogates are
// refused with 400 invalid_json naming the byte, on every JSON path, and nothing is stored.
func TestInvalidUTF8IsRefusedOnEveryJSONPath(t *testing.T) {
	tr := startTestReceiver(t, nil, &fakeAuth{sources: githubSources()})
	key := map[string]string{"X-API-Key": "key-p1"}
	for name, bad := range map[string]string{"invalid byte": "\xff", "surrogate as UTF-8": "\xed\xa0\x80", "lone surrogate": `\ud800`} {
		obj := `{"a":"x` + bad + `"}`
		for path, body := range map[string]string{
			"/v1/events":             obj,
			"/v1/events/batch":       `[{},` + obj + `]`,
			"/ingest/in_a":           "{}\n" + obj,
			"/internal/agent-output": `{"request_id":"r1","payload":` + obj + `}`,
		} {
			a := do(t, http.MethodPost, tr.url+path, []byte(body), key)
			assert.Equal(t, http.StatusBadRequest, a.status, "%s %s: %s", name, path, a.body)
			assert.Equal(t, "invalid_json", a.code(t), "%s %s", name, path)
			assert.Contains(t, string(a.body), "invalid JSON at byte", "%s %s", name, path)
		}
		a := do(t, http.MethodPost, tr.url+"/v1/logs", []byte(otlpLogPrefix+`{"stringValue":"x`+bad+`"}`+otlpLogSuffix), key)
		assert.Equal(t, http.StatusBadRequest, a.status, "%s /v1/logs: %s", name, a.body)
		assert.Contains(t, otlpStatus(t, a).Message, fmt.Sprintf("invalid JSON at byte %d", len(otlpLogPrefix+`{"stringValue":"x`)), name)
	}

	for _, h := range []string{"X-Event-Type", "X-Source"} {
		a := do(t, http.MethodPost, tr.url+"/v1/events", []byte(`{}`), map[string]string{"X-API-Key": "key-p1", h: "deploy\xff"})
		assert.Equal(t, http.StatusBadRequest, a.status, "%s: %s", h, a.body)
		assert.Contains(t, string(a.body), h+" is not valid UTF-8", h)
	}
	assert.Empty(t, tr.consumed(), "a refused request publishes nothing")

	// Valid UTF-8, escaped or not, and surrogate pairs are kept as sent.
	obj := `{"a":"é😀\ud83d\ude00"}`
	a := do(t, http.MethodPost, tr.url+"/v1/events", []byte(obj), map[string]string{"X-API-Key": "key-p1", "X-Event-Type": "déploiement"})
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.body)
	assert.Equal(t, `{"a":"é😀\ud83d\ude00","_event_type":"déploiement"}`, tr.consumed()[0].recs[0])
}

// OTLP/JSON stops at the nesting depth of every other JSON path.
func TestOTLPJSONNestingLimit(t *testing.T) {
	tr := startTestReceiver(t, nil, &fakeAuth{})
	var err error
	tr.logs, err = consumer.NewLogs(func(_ context.Context, ld plog.Logs) error {
		return records.FlattenLogs(ld, time.Now(), func(rec []byte) error {
			if !json.Valid(rec) {
				return errors.New("invalid record")
			}
			return nil
		})
	})
	require.NoError(t, err)
	for name, c := range map[string]struct {
		open, close string
		levels      int // JSON levels per value level
	}{
		"arrayValue":  {`{"arrayValue":{"values":[`, `]}}`, 3},
		"kvlistValue": {`{"kvlistValue":{"values":[{"key":"k","value":`, `}]}}`, 4},
	} {
		fixed := strings.Count(otlpLogPrefix, "{") + strings.Count(otlpLogPrefix, "[")
		within := (eventjson.MaxDepth - fixed - 1) / c.levels // the leaf is one more level
		for levels, want := range map[int]int{within: http.StatusOK, within + 1: http.StatusBadRequest, 100_000: http.StatusBadRequest} {
			body := otlpLogPrefix + strings.Repeat(c.open, levels) + `{"intValue":"1"}` + strings.Repeat(c.close, levels) + otlpLogSuffix
			a := do(t, http.MethodPost, tr.url+"/v1/logs", []byte(body), map[string]string{"X-API-Key": "key-p1"})
			assert.Equal(t, want, a.status, "%s, %d levels: %.300s", name, levels, a.body)
			if want != http.StatusOK {
				assert.Contains(t, otlpStatus(t, a).Message, "nests deeper than 10000 levels", name)
			}
		}
	}
}

// A record over the exporter's limit is answered 413 naming the limit: in the contract's
// shape on JSON paths, as an OTLP Status on OTLP/HTTP, without Retry-After (a retry cannot
// succeed).
func TestRecordTooLargeIsAnswered413(t *testing.T) {
	tr := startTestReceiver(t, nil, &fakeAuth{sources: githubSources()})
	var err error
	tr.logs, err = consumer.NewLogs(func(context.Context, plog.Logs) error {
		return consumererror.NewPermanent(&records.TooLargeError{Index: 1, Size: 2 << 20, Limit: 1_000_000})
	})
	require.NoError(t, err)
	for path, body := range map[string]string{"/v1/events/batch": `[{},{}]`, "/v1/events": `{}`, "/ingest/in_a": `{}`, "/internal/agent-output": `{"request_id":"r","payload":1}`} {
		a := do(t, http.MethodPost, tr.url+path, []byte(body), map[string]string{"X-API-Key": "key-p1"})
		assert.Equal(t, http.StatusRequestEntityTooLarge, a.status, path)
		assert.Equal(t, "payload_too_large", a.code(t), path)
		assert.Contains(t, string(a.body), "record 1 of the request is 2097152 bytes, over the limit of 1000000 bytes per record", path)
		assert.Empty(t, a.header.Get("Retry-After"), path)
	}
	a := do(t, http.MethodPost, tr.url+"/v1/logs", []byte(otlpLogPrefix+`{"stringValue":"x"}`+otlpLogSuffix), map[string]string{"X-API-Key": "key-p1"})
	assert.Equal(t, http.StatusRequestEntityTooLarge, a.status)
	st := otlpStatus(t, a)
	assert.Equal(t, int32(codes.InvalidArgument), st.Code)
	assert.Contains(t, st.Message, "over the limit of 1000000 bytes per record")
}

// FuzzOTLPJSONNesting builds OTLP/JSON log bodies nested by arrayValue and kvlistValue in
// a fuzzed pattern, repeated to any depth: a body within the nesting limit is stored and
// flattens into one valid record, one beyond it is refused with 400, and nothing crashes.
func FuzzOTLPJSONNesting(f *testing.F) {
	f.Add([]byte{0}, uint16(10))
	f.Add([]byte{1, 0}, uint16(1300))
	f.Add([]byte{0, 1, 1}, uint16(3000))
	f.Add([]byte{2, 0}, uint16(5))
	r, err := newReceiver(createDefaultConfig().(*Config), receivertest.NewNopSettings(metadata.Type))
	if err != nil {
		f.Fatal(err)
	}
	var flatErr error
	r.logs, _ = consumer.NewLogs(func(_ context.Context, ld plog.Logs) error {
		flatErr = records.FlattenLogs(ld, time.Unix(0, 0), func(rec []byte) error {
			if !json.Valid(rec) {
				return errors.New("invalid record")
			}
			return nil
		})
		return flatErr
	})
	r.auth = &fakeAuth{}
	handler := r.routes()
	f.Fuzz(func(t *testing.T, pattern []byte, repeat uint16) {
		if len(pattern) == 0 || len(pattern) > 8 {
			return
		}
		var open, close strings.Builder
		depth := strings.Count(otlpLogPrefix, "{") + strings.Count(otlpLogPrefix, "[")
		for i := 0; i < int(repeat%4000); i++ {
			for _, p := range pattern {
				switch p % 3 {
				case 0:
					open.WriteString(`{"arrayValue":{"values":[`)
					depth += 3
				case 1:
					open.WriteString(`{"kvlistValue":{"values":[{"key":"k","value":`)
					depth += 4
				default:
					open.WriteString(`{"arrayValue":{"values":[{"intValue":"1"},`)
					depth += 3
				}
			}
		}
		inner := open.String()
		// Close in reverse: each opener's closing text, from the innermost out.
		for i := len(inner); i > 0; {
			switch {
			case strings.HasSuffix(inner[:i], `{"arrayValue":{"values":[{"intValue":"1"},`):
				close.WriteString(`]}}`)
				i -= len(`{"arrayValue":{"values":[{"intValue":"1"},`)
			case strings.HasSuffix(inner[:i], `{"arrayValue":{"values":[`):
				close.WriteString(`]}}`)
				i -= len(`{"arrayValue":{"values":[`)
			default:
				close.WriteString(`}]}}`)
				i -= len(`{"kvlistValue":{"values":[{"key":"k","value":`)
			}
		}
		body := otlpLogPrefix + inner + `{"stringValue":"leaf"}` + close.String() + otlpLogSuffix
		req := httptest.NewRequest(http.MethodPost, "/v1/logs", bytes.NewReader([]byte(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", "key-p")
		w := httptest.NewRecorder()
		flatErr = nil
		handler.ServeHTTP(w, req)
		depth++ // the leaf
		switch {
		case depth <= eventjson.MaxDepth && w.Code != http.StatusOK:
			t.Fatalf("depth %d refused: %d %s", depth, w.Code, w.Body.Bytes())
		case depth > eventjson.MaxDepth && w.Code != http.StatusBadRequest:
			t.Fatalf("depth %d answered %d, want 400", depth, w.Code)
		case flatErr != nil:
			t.Fatalf("depth %d: %v", depth, flatErr)
		}
	})
}
