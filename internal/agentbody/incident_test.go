package agentbody

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type incidentBody struct {
	Incident struct {
		ID     string `json:"id"`
		Counts struct {
			Events int `json:"events"`
		} `json:"counts"`
	} `json:"incident"`
	Reason        string            `json:"reason"`
	Events        []json.RawMessage `json:"events"`
	EventsLeftOut *int              `json:"events_left_out"`
	Window        []json.RawMessage `json:"window"`
}

func TestIncidentCallIsTheProtocolsShape(t *testing.T) {
	inc := []byte(`{"id":"inc_0123_1","counts":{"events":3}}`)
	got := IncidentCall(inc, "opened", [][]byte{[]byte(`{"n": 1.50}`), []byte(`{"n":2}`)}, 0, [][]byte{[]byte(`{"ctx":1}`)})
	assert.Equal(t, `{"incident":{"id":"inc_0123_1","counts":{"events":3}},"reason":"opened","events":[{"n": 1.50},{"n":2}],"window":[{"ctx":1}]}`,
		string(got), "records go byte for byte; no events_left_out when none was left out")
	var b incidentBody
	require.NoError(t, json.Unmarshal(got, &b))
	assert.Equal(t, "inc_0123_1", b.Incident.ID)
	assert.Equal(t, 3, b.Incident.Counts.Events)
	assert.Nil(t, b.EventsLeftOut)

	got = IncidentCall(inc, "updated", nil, 42, nil)
	assert.Equal(t, `{"incident":{"id":"inc_0123_1","counts":{"events":3}},"reason":"updated","events":[],"events_left_out":42,"window":[]}`, string(got))
	b = incidentBody{}
	require.NoError(t, json.Unmarshal(got, &b))
	require.NotNil(t, b.EventsLeftOut)
	assert.Equal(t, 42, *b.EventsLeftOut)
	assert.NotNil(t, b.Events, "events is an array, never null")
}

// A record that is not JSON still makes a JSON body.
func TestIncidentCallStaysJSON(t *testing.T) {
	got := IncidentCall([]byte(`{"id":"x"}`), "resolved", [][]byte{[]byte("plain \xff text")}, 0, [][]byte{[]byte(`{"a":`)})
	var b incidentBody
	require.NoError(t, json.Unmarshal(got, &b), "%s", got)
	var s string
	require.NoError(t, json.Unmarshal(b.Events[0], &s))
	assert.Equal(t, "plain \uFFFD text", s)
	assert.Contains(t, string(IncidentCall([]byte(`[1]`), "opened", nil, 0, nil)), `{"incident":null,`, "the incident is an object or null")
}

// Records are whatever a project ingested: any of them, any reason and any incident
// JSON make a body that decodes in the protocol's shape with every record kept.
func FuzzIncidentCall(f *testing.F) {
	f.Add([]byte(`{"id":"inc_1"}`), "opened", []byte(`{"a":1}`), []byte(`"str"`), 3)
	f.Add([]byte(`nope`), "re\"ason", []byte("\xff"), []byte(``), 0)
	f.Fuzz(func(t *testing.T, inc []byte, reason string, e, w []byte, leftOut int) {
		got := IncidentCall(inc, reason, [][]byte{e, w}, leftOut, [][]byte{w, e, w})
		var b incidentBody
		if err := json.Unmarshal(got, &b); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, got)
		}
		if len(b.Events) != 2 || len(b.Window) != 3 {
			t.Fatalf("records lost: %s", got)
		}
		if (leftOut > 0) != (b.EventsLeftOut != nil) {
			t.Fatalf("events_left_out %d: %s", leftOut, got)
		}
	})
}
