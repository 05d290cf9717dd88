package validation

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

var parseNow = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

func TestParseBacklogRequest(t *testing.T) {
	req, refusal := ParseBacklogRequest([]byte(`{"project_id":"prj_1","pipeline":{"trigger":"event[\"a\"] == 1","batch_size":10},"since":null,"last":25,"newer":"ignored"}`), parseNow)
	require.Nil(t, refusal)
	assert.Equal(t, "prj_1", req.ProjectID)
	assert.Equal(t, 25, *req.Last)
	assert.Nil(t, req.Since)
	assert.Equal(t, 10, req.Pipeline.BatchSize)

	req, refusal = ParseBacklogRequest([]byte(`{"project_id":"prj_1","pipeline":{},"since":"2026-11-26T11:00:00Z"}`), parseNow)
	require.Nil(t, refusal)
	assert.Equal(t, parseNow.Add(-time.Hour), req.Since.UTC())

	for body, code := range map[string]string{
		``:                              apierror.InvalidJSON,
		`{"project_id":"prj_1"`:         apierror.InvalidJSON,
		`{"project_id":"prj_1"} {}`:     apierror.InvalidJSON,
		`[]`:                            apierror.InvalidBody,
		`{"project_id":"a.b","last":1}`: apierror.InvalidBody,
		`{"project_id":"prj_1"}`:        apierror.InvalidBody,
		`{"project_id":"prj_1","last":1,"since":"2026-11-26T11:00:00Z"}`:                      apierror.InvalidBody,
		`{"project_id":"prj_1","last":0}`:                                                     apierror.InvalidBody,
		`{"project_id":"prj_1","last":10001}`:                                                 apierror.InvalidBody,
		`{"project_id":"prj_1","since":"2026-11-26T13:00:00Z"}`:                               apierror.InvalidBody,
		`{"project_id":"prj_1","since":"yesterday"}`:                                          apierror.InvalidBody,
		`{"project_id":"prj_1","last":1,"pipeline":{"transforms":` + string(make101()) + `}}`: apierror.InvalidPipeline,
	} {
		_, refusal := ParseBacklogRequest([]byte(body), parseNow)
		require.NotNil(t, refusal, body)
		assert.Equal(t, code, refusal.Code, body)
		assert.False(t, refusal.OK)
		assert.Equal(t, http.StatusBadRequest, refusal.Status, body)
	}
}

func make101() []byte {
	b := []byte(`[`)
	for i := range 101 {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `"set(event[\"a\"], 1)"`...)
	}
	return append(b, ']')
}

// FuzzParseBacklogRequest feeds the responder's input (a request a control plane sent,
// carrying a user's pipeline and range) through the parser: whatever it is, the answer is
// a request that keeps the protocol's promises or a refusal in the contract's terms,
// never a panic.
func FuzzParseBacklogRequest(f *testing.F) {
	f.Add([]byte(`{"project_id":"prj_1","pipeline":{"trigger":"severity_number >= 17"},"last":25}`))
	f.Add([]byte(`{"project_id":"prj_1","pipeline":{},"since":"2026-11-26T11:00:00Z","last":null}`))
	f.Add([]byte(`{"project_id":"prj_1","since":"2026-11-26T13:00:00+01:00"}`))
	f.Add([]byte(`{"project_id":"","last":-1}`))
	f.Add([]byte(`{"project_id":"prj_1","last":1e3}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		req, refusal := ParseBacklogRequest(data, parseNow)
		if refusal != nil {
			if refusal.OK || refusal.Code == "" || refusal.Message == "" || refusal.Status < 400 || refusal.Status > 499 {
				t.Fatalf("a refusal outside the contract: %+v", refusal)
			}
			return
		}
		if !streams.ValidProjectID(req.ProjectID) {
			t.Fatalf("accepted project id %q", req.ProjectID)
		}
		if (req.Last == nil) == (req.Since == nil) {
			t.Fatalf("accepted a request without exactly one of last and since: %s", data)
		}
		if req.Last != nil && (*req.Last < 1 || *req.Last > MaxBacklogRecords) {
			t.Fatalf("accepted last %d", *req.Last)
		}
		if req.Since != nil && req.Since.After(parseNow) {
			t.Fatalf("accepted a since in the future: %s", req.Since)
		}
		if _, ok := CheckLimits(req.Pipeline); !ok {
			t.Fatalf("accepted a pipeline past the limits")
		}
	})
}
