package service

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The data plane's messages, as its compiler writes them (internal/collector/ottlevent), give
// the page a statement and a place to point at.
func TestProblemOf(t *testing.T) {
	p := problemOf("trigger", "condition \"severity_number >= = 17\": condition has invalid syntax at 1:20 near `= 17`: (expected Field (\".\" Field)*)")
	assert.Equal(t, &Position{Line: 1, Column: 20}, p.Position)
	assert.Nil(t, p.Index)
	assert.Equal(t, "condition has invalid syntax at 1:20 near `= 17`: (expected Field (\".\" Field)*)", p.Message)

	p = problemOf("transforms", `statement 1 "set(event[\"a\"], 1": statement has invalid syntax at 1:18: (expected ")" Key*)`)
	if assert.NotNil(t, p.Index) {
		assert.Equal(t, 1, *p.Index)
	}
	assert.Equal(t, &Position{Line: 1, Column: 18}, p.Position)

	p = problemOf("trigger", `condition "attributes.http.method == \"x\"" at 1:1: invalid path "attributes.http.method": nested fields are reached with keys`)
	assert.Equal(t, &Position{Line: 1, Column: 1}, p.Position)
	assert.Equal(t, `invalid path "attributes.http.method": nested fields are reached with keys`, p.Message)

	// An expression that itself reads "at 3:4" is not taken for the position.
	p = problemOf("trigger", `condition "body == \"at 3:4\"": unknown function`)
	assert.Nil(t, p.Position)
	assert.Equal(t, "unknown function", p.Message)

	p = problemOf("batch_size", "must be between 1 and 1000, got 5000")
	assert.Equal(t, PipelineProblem{Field: "batch_size", Message: "must be between 1 and 1000, got 5000"}, p)
}

// The message is the data plane's text, a user's expression inside: whatever it holds,
// reading it never panics and a position is positive.
func FuzzProblemOf(f *testing.F) {
	f.Add("condition \"a >= = 1\": condition has invalid syntax at 1:6 near `= 1`")
	f.Add(`statement 12 "x": at 0:0: y`)
	f.Add(`value "\"`)
	f.Fuzz(func(t *testing.T, msg string) {
		p := problemOf("trigger", msg)
		if p.Position != nil && (p.Position.Line < 1 || p.Position.Column < 1) {
			t.Fatalf("position %+v", p.Position)
		}
		if p.Index != nil && *p.Index < 0 {
			t.Fatalf("index %d", *p.Index)
		}
	})
}
