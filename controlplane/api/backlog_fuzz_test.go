package api

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-svc/otelcol-svc/controlplane/service"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
)

// The backlog body comes from anyone with a token, and what it lets through decides how
// many agent calls someone pays for: decoding never panics, every refusal is a 400 in the
// contract's shape said in JSON's words, and whatever passes names exactly one of last
// (within 1..MaxBacklogLast) and since (a time not in the future).
func FuzzBacklogBody(f *testing.F) {
	for _, s := range []string{
		`{"last": 25}`, `{"last": 25, "preview": true}`, `{"since": "2026-11-26T10:00:00Z"}`,
		`{"since": "2026-11-26T10:00:00.123456789+01:00", "preview": true, "expect_calls": 3}`, `{}`, `{"last": 0}`,
		`{"last": 10001}`, `{"last": 1.5}`, `{"last": "5"}`, `{"since": "yesterday"}`, `{"last": 5, "since": "2026-01-01T00:00:00Z"}`,
		`{"since": "2999-01-01T00:00:00Z"}`, `{"last": 5, "extra": 1}`, `{"since": null, "last": null}`, `{"expect_calls": -1, "last": 2}`,
		`[]`, `{`, `"x"`, `{"last": 99999999999999999999}`, `{"since": "\u0000"}`,
	} {
		f.Add([]byte(s))
	}
	now := time.Now()
	f.Fuzz(func(t *testing.T, body []byte) {
		var b backlogBody
		if e := decodeBytes(body, &b); e != nil {
			if e.Status != http.StatusBadRequest || e.Message == "" {
				t.Fatalf("decode error %+v", e)
			}
			if strings.Contains(e.Message, "api.") || strings.Contains(e.Message, "*int") || strings.Contains(e.Message, "*string") {
				t.Fatalf("decode error names a Go type: %q", e.Message)
			}
			return
		}
		req, err := b.request(now)
		if err != nil {
			var e *apierror.Error
			if !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Code != apierror.InvalidBody || e.Message == "" {
				t.Fatalf("refusal not a 400 invalid_body: %v", err)
			}
			return
		}
		if (req.Since == nil) == (req.Last == nil) {
			t.Fatalf("accepted %q naming both or neither of since and last", body)
		}
		if req.Last != nil && (*req.Last < 1 || *req.Last > service.MaxBacklogLast) {
			t.Fatalf("accepted last %d", *req.Last)
		}
		if req.Since != nil && req.Since.After(now) {
			t.Fatalf("accepted a future since %v", req.Since)
		}
		if req.ExpectCalls != nil && *req.ExpectCalls < 0 {
			t.Fatalf("accepted expect_calls %d", *req.ExpectCalls)
		}
	})
}
