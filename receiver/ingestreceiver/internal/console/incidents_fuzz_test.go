package console

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
)

// FuzzEmptyObjectBody feeds an incident action any body: it never panics, takes exactly
// nothing (whitespace aside) or an empty JSON object, and refuses the rest with 400, or
// 413 past maxActionBody.
func FuzzEmptyObjectBody(f *testing.F) {
	for _, s := range []string{
		``, `{}`, " { } \n", "\t", `{"a":1}`, `[]`, `null`, `{`, `{}{}`, `{} x`, `""`, `0`,
		`{"":null}`, "\xff", "\ufeff{}", strings.Repeat(" ", maxActionBody+1),
		`{` + strings.Repeat(" ", maxActionBody) + `}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		e := emptyObjectBody(req)
		trimmed := strings.TrimSpace(string(body))
		var m map[string]json.RawMessage
		want := len(body) <= maxActionBody &&
			(trimmed == "" || json.Unmarshal(body, &m) == nil && m != nil && len(m) == 0)
		switch {
		case want && e != nil:
			t.Fatalf("%q refused: %v", body, e)
		case !want && e == nil:
			t.Fatalf("%q taken as no input", body)
		case e != nil && len(body) > maxActionBody && (e.Status != http.StatusRequestEntityTooLarge || e.Code != apierror.PayloadTooLarge):
			t.Fatalf("%d bytes: %d %s, want 413", len(body), e.Status, e.Code)
		case e != nil && len(body) <= maxActionBody && (e.Status != http.StatusBadRequest || e.Code != apierror.InvalidBody):
			t.Fatalf("%q: %d %s, want 400", body, e.Status, e.Code)
		}
	})
}
