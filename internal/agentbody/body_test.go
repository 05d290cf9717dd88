package agentbody

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestArrayKeepsRecordBytes(t *testing.T) {
	assert.Equal(t, `[{"a":1}]`, string(Array([][]byte{[]byte(`{"a":1}`)})))
	assert.Equal(t, `[{"a":1},{ "b" : 2 }]`, string(Array([][]byte{[]byte(`{"a":1}`), []byte(`{ "b" : 2 }`)})))
	assert.Equal(t, `[]`, string(Array(nil)))
}

func TestWindowCallKeepsRecordBytes(t *testing.T) {
	got := WindowCall([]byte(`{"n": 1.50}`), [][]byte{[]byte(`{"a":1}`), []byte(`{"b": 12345678901234567890}`)}, 0, 0)
	assert.Equal(t, `{"trigger":{"n": 1.50},"window":[{"a":1},{"b": 12345678901234567890}]}`, string(got),
		"without guardrails at work the body is what it always was")
	assert.Equal(t, `{"trigger":{},"window":[]}`, string(WindowCall([]byte(`{}`), nil, 0, 0)))
	assert.Equal(t, `{"trigger":{},"window":[{"a":1}],"window_truncated":7,"suppressed":999}`,
		string(WindowCall([]byte(`{}`), [][]byte{[]byte(`{"a":1}`)}, 7, 999)))
}
