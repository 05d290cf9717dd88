package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

func raws(t *testing.T, docs ...string) []json.RawMessage {
	t.Helper()
	out := make([]json.RawMessage, len(docs))
	for i, d := range docs {
		out[i] = json.RawMessage(d)
	}
	return out
}

func TestSummariseCountsErrorsByServiceAndMessage(t *testing.T) {
	res := summarise(raws(t,
		`{"severityNumber": 17, "body": "payment declined", "resourceAttributes": {"service.name": "checkout"}}`,
		`{"severityNumber": 18, "body": "payment declined", "resourceAttributes": {"service.name": "checkout"}}`,
		`{"severityNumber": 9, "body": "cart loaded", "resourceAttributes": {"service.name": "cart"}}`,
		`{"name": "GET /pay", "status": {"code": "error", "message": "boom"}, "resourceAttributes": {"service.name": "gateway"}}`,
		`{"_event_type": "payment.failed", "status": "failed", "message": "card expired", "service": "billing"}`,
		`not json`,
	))
	assert.Equal(t, 5, res.Records)
	assert.Equal(t, 4, res.Errors)
	assert.Equal(t, []string{"billing", "checkout", "gateway"}, res.Services)
	assert.Equal(t, "payment declined (×2)", res.Top[0], "the most frequent message first")
	assert.Equal(t, "4 errors in billing, checkout, gateway: payment declined (×2); GET /pay (×1); card expired (×1)", res.Text)
}

func TestSummariseWithoutErrors(t *testing.T) {
	res := summarise(raws(t, `{"severityNumber": 9, "body": "ok"}`))
	assert.Equal(t, "No errors in 1 record.", res.Text)
	assert.Zero(t, res.Errors)
}
