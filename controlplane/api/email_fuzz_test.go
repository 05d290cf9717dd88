package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/otelcol-svc/otelcol-svc/controlplane/service"
)

// The email endpoints' bodies come from anyone, unauthenticated: decoding them never
// panics, refuses in JSON's words, and an address that passes is one the mail goes to as
// written (lowercase, one address, no name, no header-breaking characters).
func FuzzEmailBodies(f *testing.F) {
	for _, s := range []string{`{"email":"a@example.com"}`, `{"token":"osr_x","password":"12345678"}`,
		`{"current_password":"a","password":"b"}`, `{"email":"A <a@example.com>"}`, `{"email":"a@example.com\r\nBcc: b@example.com"}`,
		`{"email":["a"]}`, `{"token":1}`, `{}`, `{`, `null`, `{"email":"a@b","x":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var reset struct {
			Email string `json:"email"`
		}
		var tok tokenBody
		var change struct {
			Current  string `json:"current_password"`
			Password string `json:"password"`
		}
		for _, v := range []any{&reset, &tok, &change} {
			if e := decodeBytes(body, v); e != nil {
				if e.Status != http.StatusBadRequest || e.Message == "" || strings.Contains(e.Message, "struct") {
					t.Fatalf("decode error %+v", e)
				}
			}
		}
		if addr, ok := service.NormalizeEmail(reset.Email); ok {
			if addr != strings.ToLower(addr) || strings.ContainsAny(addr, "\r\n<>, ") {
				t.Fatalf("accepted %q as %q", reset.Email, addr)
			}
		}
	})
}
