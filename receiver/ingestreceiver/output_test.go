package ingestreceiver

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseAgentOutput(t *testing.T) {
	out, e := parseAgentOutput([]byte(`{"request_id": "req_1", "payload": {"summary": "disk full", "n": 1.50}}`), "")
	assert.Nil(t, e)
	assert.Equal(t, "req_1", out.RequestID)
	assert.Equal(t, `{"summary": "disk full", "n": 1.50}`, string(out.Payload), "the payload's bytes as sent")

	out, e = parseAgentOutput([]byte(`{"payload": "ok"}`), "req_hdr")
	assert.Nil(t, e)
	assert.Equal(t, "req_hdr", out.RequestID, "the header serves when the body has no request_id")

	// An agent written elsewhere adds its own metadata beside the two fields read: the
	// result is stored, the rest ignored (it was 400 unknown field "extra").
	out, e = parseAgentOutput([]byte(`{"request_id": "req_2", "extra": {"model": "m1"}, "payload": [1, 2], "trace": "t", "n": 3}`), "")
	if assert.Nil(t, e) {
		assert.Equal(t, "req_2", out.RequestID)
		assert.Equal(t, `[1, 2]`, string(out.Payload), "only the payload's bytes, none of the extra fields")
	}

	for body, code := range map[string]string{
		`{"payload": "ok"}`:                       "invalid_body", // no request id anywhere
		`{"request_id": "r"}`:                     "invalid_body", // no payload
		`{"requestId": "r", "payload": 1}`:        "invalid_body", // misspelt field
		`{"request_id": "a b", "payload": 1}`:     "invalid_body",
		`{"request_id": "r", "payload": `:         "invalid_json",
		`{"request_id": "r", "payload": 1} {"x"}`: "invalid_json",
	} {
		_, e := parseAgentOutput([]byte(body), "")
		if assert.NotNil(t, e, body) {
			assert.Equal(t, code, e.Code, body)
		}
	}

	for body, want := range map[string]string{
		`"disk full"`:                        "the body must be a JSON object, not a string",
		`[{"request_id": "r"}]`:              "the body must be a JSON object, not an array",
		`{"request_id": 5, "payload": 1}`:    "request_id must be a string, not a number",
		`{"request_id": true, "payload": 1}`: "request_id must be a string, not true or false",
	} {
		_, e := parseAgentOutput([]byte(body), "req_h")
		if assert.NotNil(t, e, body) {
			assert.Equal(t, "invalid_body", e.Code, body)
			assert.Contains(t, e.Message, want, body)
			assert.NotContains(t, e.Message, "agentOutput", "no message names an internal type")
			assert.NotContains(t, e.Message, "Go ", "no message names an internal type")
		}
	}
}

func FuzzParseAgentOutput(f *testing.F) {
	for _, s := range []string{`{"request_id":"r","payload":{}}`, `{"payload":[1,2]}`, `{"request_id":1}`, `{`, `"text"`, `[1]`,
		`{"request_id":"r","payload":1,"extra":{"a":[1]}}`, `{"extra":null,"payload":"x"}`, `{"request_id":"r","extra":1}`} {
		f.Add([]byte(s), "req_h")
	}
	f.Fuzz(func(t *testing.T, body []byte, header string) {
		out, e := parseAgentOutput(body, header)
		if e != nil {
			if e.Status != 400 || e.Message == "" {
				t.Fatalf("bad error %+v", e)
			}
			if strings.Contains(e.Message, "agentOutput") || strings.Contains(e.Message, "Go ") {
				t.Fatalf("the message names an internal type: %s", e.Message)
			}
			return
		}
		if out.RequestID == "" || len(out.Payload) == 0 {
			t.Fatalf("accepted without request id or payload: %q", body)
		}
	})
}
