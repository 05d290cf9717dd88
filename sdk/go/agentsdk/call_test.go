package agentsdk

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-svc/otelcol-svc/internal/webhooksig"
)

const (
	testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	otherKey   = "whsec_c2VjcmV0LW9mLWFub3RoZXItcHJvamVjdA=="
	testID     = "req_5f0c3b1e9a7d4c2b8e6f1a0d3c5b7e9f"
)

// signedRequest builds a call the way the agent exporter does: the same id in
// X-Request-Id and webhook-id, signed with secret at ts.
func signedRequest(t testing.TB, secret, body string, ts time.Time) *http.Request {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/agent", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-Request-Id", testID)
	if err := webhooksig.SetHeaders(r.Header, secret, testID, ts, []byte(body)); err != nil {
		t.Fatal(err)
	}
	return r
}

func rawStrings(rs []json.RawMessage) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}

func TestParseCallBatch(t *testing.T) {
	body := `[{"_event_type":"payment.failed","amount":42}, {"msg":"x",  "n":1.50}]`
	c, err := ParseCall(signedRequest(t, testSecret, body, time.Now()), testSecret)
	if err != nil {
		t.Fatal(err)
	}
	if c.RequestID != testID || c.Windowed() || string(c.Raw) != body {
		t.Fatalf("call = %+v", c)
	}
	// Records keep their bytes (spacing, number spelling), as the collector sent them.
	want := []string{`{"_event_type":"payment.failed","amount":42}`, `{"msg":"x",  "n":1.50}`}
	if got := rawStrings(c.Records); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("records = %q, want %q", got, want)
	}
}

func TestParseCallWindow(t *testing.T) {
	body := `{"trigger": {"level":"error"}, "window": [{"level":"info","i":1},{"level":"warn","i":2}]}`
	c, err := ParseCall(signedRequest(t, testSecret, body, time.Now()), testSecret)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Windowed() || c.Records != nil {
		t.Fatalf("want a window call, got %+v", c)
	}
	if string(c.Trigger) != `{"level":"error"}` {
		t.Fatalf("trigger = %s", c.Trigger)
	}
	if got := strings.Join(rawStrings(c.Window), "|"); got != `{"level":"info","i":1}|{"level":"warn","i":2}` {
		t.Fatalf("window = %s", got)
	}

	c, err = ParseCall(signedRequest(t, testSecret, `{"trigger":{"a":1},"window":[]}`, time.Now()), testSecret)
	if err != nil || len(c.Window) != 0 || c.Window == nil {
		t.Fatalf("empty window: %+v, %v", c, err)
	}
}

func TestParseCallRefusesForgedCalls(t *testing.T) {
	body := `[{"a":1}]`
	cases := map[string]struct {
		req  func() *http.Request
		want error
	}{
		"tampered body": {func() *http.Request {
			r := signedRequest(t, testSecret, body, time.Now())
			r.Body = io.NopCloser(strings.NewReader(`[{"a":2}]`))
			return r
		}, webhooksig.ErrNoMatchingSig},
		"other secret": {func() *http.Request {
			return signedRequest(t, otherKey, body, time.Now())
		}, webhooksig.ErrNoMatchingSig},
		"replayed after 10 minutes": {func() *http.Request {
			return signedRequest(t, testSecret, body, time.Now().Add(-10*time.Minute))
		}, webhooksig.ErrTimestampTooOld},
		"timestamp in the future": {func() *http.Request {
			return signedRequest(t, testSecret, body, time.Now().Add(10*time.Minute))
		}, webhooksig.ErrTimestampTooNew},
		"unsigned": {func() *http.Request {
			r := signedRequest(t, testSecret, body, time.Now())
			r.Header.Del(webhooksig.HeaderSignature)
			return r
		}, webhooksig.ErrMissingHeader},
		"request id changed": {func() *http.Request {
			r := signedRequest(t, testSecret, body, time.Now())
			r.Header.Set(webhooksig.HeaderID, "req_other")
			return r
		}, webhooksig.ErrNoMatchingSig},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := ParseCall(tc.req(), testSecret)
			if !errors.Is(err, ErrSignature) || !errors.Is(err, tc.want) {
				t.Fatalf("err = %v (call %+v), want ErrSignature and %v", err, c, tc.want)
			}
			if s := HTTPStatus(err); s != http.StatusUnauthorized {
				t.Fatalf("HTTPStatus = %d, want 401", s)
			}
		})
	}
}

func TestParseCallAcceptsAnyOfSeveralSignatures(t *testing.T) {
	// During a secret rotation the header carries one signature per secret.
	body := `[{"a":1}]`
	now := time.Now()
	r := signedRequest(t, testSecret, body, now)
	old, err := webhooksig.Sign(otherKey, testID, now, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set(webhooksig.HeaderSignature, old+" "+r.Header.Get(webhooksig.HeaderSignature))
	if _, err := ParseCall(r, testSecret); err != nil {
		t.Fatalf("the second signature matches, but: %v", err)
	}
}

func TestParseCallSecretRequiredUnlessUnsignedAllowed(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/agent", strings.NewReader(`[{"a":1}]`))
	r.Header.Set("X-Request-Id", testID)
	_, err := ParseCall(r, "")
	if !errors.Is(err, ErrNoSecret) || HTTPStatus(err) != http.StatusInternalServerError {
		t.Fatalf("empty secret: %v (status %d), want ErrNoSecret and 500", err, HTTPStatus(err))
	}

	r = httptest.NewRequest(http.MethodPost, "/agent", strings.NewReader(`[{"a":1}]`))
	r.Header.Set("X-Request-Id", testID)
	c, err := Verifier{AllowUnsigned: true}.ParseCall(r)
	if err != nil || len(c.Records) != 1 || c.RequestID != testID {
		t.Fatalf("AllowUnsigned: %+v, %v", c, err)
	}

	// A configured secret is checked even with AllowUnsigned.
	r = httptest.NewRequest(http.MethodPost, "/agent", strings.NewReader(`[{"a":1}]`))
	r.Header.Set("X-Request-Id", testID)
	if _, err := (Verifier{Secret: testSecret, AllowUnsigned: true}).ParseCall(r); !errors.Is(err, ErrSignature) {
		t.Fatalf("unsigned call with a secret set: %v, want ErrSignature", err)
	}
}

func TestParseCallBrokenSecretIsAServerError(t *testing.T) {
	// The agent's configuration is wrong, not the call: 500 makes the collector retry
	// until it is fixed instead of dead-lettering the calls.
	_, err := ParseCall(signedRequest(t, testSecret, `[]`, time.Now()), "whsec_not base64!")
	if !errors.Is(err, webhooksig.ErrInvalidSecret) || HTTPStatus(err) != http.StatusInternalServerError {
		t.Fatalf("err = %v, status %d", err, HTTPStatus(err))
	}
}

func TestParseCallRejectsBodiesThatAreNotCalls(t *testing.T) {
	for _, body := range []string{``, `{"a":1}`, `{"trigger":null,"window":[]}`, `"text"`, `[{"a":1}`, `[1] [2]`, `{"trigger":{},"window":{}}`} {
		_, err := ParseCall(signedRequest(t, testSecret, body, time.Now()), testSecret)
		if !errors.Is(err, ErrBody) || HTTPStatus(err) != http.StatusBadRequest {
			t.Errorf("body %q: err = %v, want ErrBody (400)", body, err)
		}
	}
}

func TestParseCallRequestIDFromWebhookID(t *testing.T) {
	r := signedRequest(t, testSecret, `[]`, time.Now())
	r.Header.Del("X-Request-Id")
	c, err := ParseCall(r, testSecret)
	if err != nil || c.RequestID != testID {
		t.Fatalf("call %+v, %v; want the webhook-id as request id", c, err)
	}

	r = httptest.NewRequest(http.MethodPost, "/agent", strings.NewReader(`[]`))
	if _, err := (Verifier{AllowUnsigned: true}).ParseCall(r); !errors.Is(err, ErrBody) {
		t.Fatalf("no id at all: %v, want ErrBody", err)
	}
}

func TestParseCallBodyLimit(t *testing.T) {
	body := `[{"padding":"` + strings.Repeat("x", 100) + `"}]`
	v := Verifier{Secret: testSecret, MaxBodyBytes: 64}

	_, err := v.ParseCall(signedRequest(t, testSecret, body, time.Now()))
	if !errors.Is(err, ErrBodyTooLarge) || HTTPStatus(err) != http.StatusRequestEntityTooLarge {
		t.Fatalf("declared length: %v", err)
	}
	// A chunked body has no declared length; the limit holds while reading.
	r := signedRequest(t, testSecret, body, time.Now())
	r.ContentLength = -1
	if _, err := v.ParseCall(r); !errors.Is(err, ErrBodyTooLarge) {
		t.Fatalf("chunked: %v", err)
	}
	// At the limit is fine.
	exact := `[` + strings.Repeat(" ", 62) + `]`
	if _, err := v.ParseCall(signedRequest(t, testSecret, exact, time.Now())); err != nil {
		t.Fatalf("a body of exactly MaxBodyBytes: %v", err)
	}
}

func TestVerifyWebhook(t *testing.T) {
	for _, body := range []string{`{"summary":"disk full","hosts":["a","b"]}`, `"a plain string"`, `[1,2]`, `null`} {
		wh, err := VerifyWebhook(signedRequest(t, testSecret, body, time.Now()), testSecret)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if string(wh.Payload) != body || wh.RequestID != testID || wh.WebhookID != testID {
			t.Fatalf("%s: got %+v", body, wh)
		}
	}

	r := signedRequest(t, testSecret, `{"ok":true}`, time.Now())
	r.Body = io.NopCloser(strings.NewReader(`{"ok":false}`))
	if _, err := VerifyWebhook(r, testSecret); !errors.Is(err, ErrSignature) {
		t.Fatalf("tampered: %v", err)
	}
	if _, err := VerifyWebhook(signedRequest(t, testSecret, `not json`, time.Now()), testSecret); !errors.Is(err, ErrBody) {
		t.Fatalf("not JSON: %v", err)
	}
}

// FuzzParseCall signs whatever body the fuzzer makes, so the decoder behind the
// signature check is reached, and checks what a handler relies on.
func FuzzParseCall(f *testing.F) {
	for _, s := range []string{`[{"a":1},{"b":[1,2]}]`, `{"trigger":{"a":1},"window":[{"b":2}]}`, `[]`, `{"trigger":1}`, ` [ ] `, `{}`, `[`, "\xff"} {
		f.Add([]byte(s))
	}
	now := time.Now()
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/agent", bytes.NewReader(body))
		r.Header.Set("X-Request-Id", testID)
		if err := webhooksig.SetHeaders(r.Header, testSecret, testID, now, body); err != nil {
			t.Fatal(err)
		}
		c, err := ParseCall(r, testSecret)
		if err != nil {
			if !errors.Is(err, ErrBody) {
				t.Fatalf("a correctly signed body failed with %v, want ErrBody", err)
			}
			return
		}
		if !bytes.Equal(c.Raw, body) || !json.Valid(body) {
			t.Fatalf("accepted %q, Raw %q", body, c.Raw)
		}
		if (c.Records != nil) == c.Windowed() {
			t.Fatalf("call %+v: want exactly one of Records and Trigger", c)
		}
		for _, rec := range append(append([]json.RawMessage{c.Trigger}, c.Records...), c.Window...) {
			if rec != nil && !json.Valid(rec) {
				t.Fatalf("record %q is not JSON", rec)
			}
		}
	})
}
