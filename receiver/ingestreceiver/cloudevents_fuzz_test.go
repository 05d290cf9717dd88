package ingestreceiver

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
	"github.com/otelcol-svc/otelcol-svc/receiver/ingestreceiver/internal/metadata"
)

// The mode of a CloudEvents request to /v1/events is picked from its Content-Type and
// ce-* headers, then its events become records: whatever they hold, a request is stored
// as events that are JSON objects carrying _event_type, or refused with a 4xx, never a
// 500 or a panic.
func FuzzCloudEventsRequest(f *testing.F) {
	f.Add("application/cloudevents+json", "", "", `{"specversion":"1.0","type":"t","source":"/s","id":"1","data":{"a":1}}`)
	f.Add("application/cloudevents-batch+json", "", "", `[{"specversion":"1.0","type":"t","id":"1","data":"x"},{"specversion":"1.0","type":"u","data_base64":"AA=="}]`)
	f.Add("text/plain", "1.0", "com.example%20ping", "plain text")
	f.Add("application/json", "1.0", "", `{"a":"\ud800"}`)
	f.Add("application/octet-stream", "1.0", "t", "\xff\xfe")
	f.Add("application/cloudevents+json; charset=utf-8", "", "", `{"specversion":"1.0","type":"t","data":[1,2]}`)
	var recs [][]string
	var infos []pipelinectx.Ingest
	r, err := newReceiver(createDefaultConfig().(*Config), receivertest.NewNopSettings(metadata.Type))
	if err != nil {
		f.Fatal(err)
	}
	r.logs, _ = consumer.NewLogs(func(ctx context.Context, ld plog.Logs) error {
		lrs := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
		var rs []string
		for i := 0; i < lrs.Len(); i++ {
			rs = append(rs, string(lrs.At(i).Body().Bytes().AsRaw()))
		}
		recs, infos = append(recs, rs), append(infos, pipelinectx.IngestFrom(ctx))
		return nil
	})
	auth := &fakeAuth{}
	r.auth, r.dp = auth, auth
	r.console = r.newConsole()
	routes := r.routes()
	f.Fuzz(func(t *testing.T, contentType, specVersion, ceType, body string) {
		req := httptest.NewRequest(http.MethodPost, "/v1/events", bytes.NewReader([]byte(body)))
		req.Header.Set("X-API-Key", "key-p1")
		req.Header.Set("Content-Type", contentType)
		if specVersion != "" {
			req.Header.Set("Ce-Specversion", specVersion)
			req.Header.Set("Ce-Type", ceType)
			req.Header.Set("Ce-Source", "/fuzz")
			req.Header.Set("Ce-Id", "1")
		}
		before := len(recs)
		w := httptest.NewRecorder()
		routes.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("%d for a request's content: %s", w.Code, w.Body)
		}
		if w.Code != http.StatusAccepted {
			if len(recs) != before {
				t.Fatalf("refused with %d, yet records were stored", w.Code)
			}
			return
		}
		if !isCloudEvents(req) {
			return
		}
		for j := before; j < len(recs); j++ {
			for i, rec := range recs[j] {
				var m map[string]any
				if err := json.Unmarshal([]byte(rec), &m); err != nil {
					t.Fatalf("record %d is not a JSON object: %v: %s", i, err, rec)
				}
				if s, ok := m["_event_type"].(string); !ok || s == "" {
					t.Fatalf("record %d has no _event_type: %s", i, rec)
				}
			}
			if len(infos[j].RecordIDs) != len(recs[j]) {
				t.Fatalf("%d message ids for %d records", len(infos[j].RecordIDs), len(recs[j]))
			}
		}
	})
}
