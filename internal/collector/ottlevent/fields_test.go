package ottlevent

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
)

var partialConditions = []string{
	`severity_number >= 17`,
	`severity_number >= 17 and resource_attributes["service.name"] == "checkout"`,
	`event["_event_type"] == "payment.failed" and status == "failed"`,
	`IsMatch(body, "time(d)? ?out")`,
	`trace_id != "" or attributes["http.status_code"] >= 500`,
	`payload["data"]["object"]["outcome"]["reason"] == "card_declined"`,
	`signal == "log"`,
}

var partialRecords = []string{
	`{"resourceAttributes":{"service.name":"checkout"},"scope":{"name":"x"},"severityNumber":17,"severityText":"ERROR","body":"timed out","attributes":{"http.status_code":502},"traceId":"ab","spanId":"cd","timestamp":"t"}`,
	`{"resourceAttributes":{"service.name":"cart"},"severityNumber":9,"body":"ok \"quoted\" }{ ][","attributes":{},"traceId":"","spanId":""}`,
	`{"status":"failed","_event_type":"payment.failed","nested":{"a":[1,{"b":"}"}],"c":null},"big":12345678901234567890}`,
	`{"_event_type":"charge.failed","payload":{"data":{"object":{"outcome":{"reason":"card_declined"}}}},"labels":{}}`,
	`{"trace_id":"x","severity_number":20,"s":"\\\\","e":"\u00e9"}`,
	`{}`,
}

// A condition gives the same answer on the record decoded in part as on the whole one.
func TestPartialDecodeMatchesFullDecode(t *testing.T) {
	set := componenttest.NewNopTelemetrySettings()
	for _, expr := range partialConditions {
		c, err := CompileCondition(expr, set)
		require.NoError(t, err, expr)
		fields, ok := c.Reads()
		require.True(t, ok, "%s reads named fields only", expr)
		for _, raw := range partialRecords {
			full, err := DecodeRecord([]byte(raw), SignalLog)
			require.NoError(t, err)
			part, err := DecodeRecordFields([]byte(raw), SignalLog, fields)
			require.NoError(t, err)
			want, _ := c.Match(context.Background(), full)
			got, _ := c.Match(context.Background(), part)
			assert.Equal(t, want, got, "%s on %s", expr, raw)
		}
	}
	c, err := CompileCondition(`Len(event) > 2`, set)
	require.NoError(t, err)
	_, ok := c.Reads()
	assert.False(t, ok, "a condition over the whole record needs it whole")
	c, err = CompileCondition(`severity_number > 1`, set)
	require.NoError(t, err)
	fields, _ := c.Reads()
	assert.Equal(t, map[string]bool{"severityNumber": true, "severity_number": true}, fields, "an alias reads both spellings")
}

func FuzzDecodeRecordFields(f *testing.F) {
	for _, r := range partialRecords {
		f.Add([]byte(r))
	}
	set := componenttest.NewNopTelemetrySettings()
	var conds []*Condition
	for _, expr := range partialConditions {
		c, err := CompileCondition(expr, set)
		if err != nil {
			f.Fatal(err)
		}
		conds = append(conds, c)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		full, err := DecodeRecord(data, SignalLog)
		if err != nil {
			return // the stream holds valid objects only
		}
		for _, c := range conds {
			fields, _ := c.Reads()
			part, err := DecodeRecordFields(data, SignalLog, fields)
			if err != nil {
				t.Fatalf("partial decode failed where the full one did not: %v", err)
			}
			want, _ := c.Match(context.Background(), full)
			got, _ := c.Match(context.Background(), part)
			if want != got {
				t.Fatalf("%s: full %v, partial %v on %q", c.String(), want, got, data)
			}
			// Into a record that held another one before, as the trigger's scratch record.
			set := NewFieldSet(fields)
			reused, err := DecodeRecordFieldsInto(nil, []byte(partialRecords[0]), SignalLog, set)
			if err != nil {
				t.Fatal(err)
			}
			if reused, err = DecodeRecordFieldsInto(reused, data, SignalLog, set); err != nil {
				t.Fatalf("decoding into a used record failed where the full one did not: %v", err)
			}
			if got, _ := c.Match(context.Background(), reused); want != got {
				t.Fatalf("%s: full %v, into a used record %v on %q", c.String(), want, got, data)
			}
		}
	})
}

func BenchmarkDecodeRecordFields(b *testing.B) {
	raw := []byte(partialRecords[0])
	fields := map[string]bool{"severityNumber": true, "severity_number": true}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := DecodeRecordFields(raw, SignalLog, fields); err != nil {
			b.Fatal(err)
		}
	}
}

// A value expression (a fingerprint) gives the same value on the record decoded in part
// as on the whole one, and one over the whole record says it needs it whole.
func TestValueReadsMatchFullDecode(t *testing.T) {
	set := componenttest.NewNopTelemetrySettings()
	for _, expr := range []string{`resource_attributes["service.name"]`, `Concat([status, _event_type], "/")`, `payload["data"]["object"]["outcome"]["reason"]`} {
		v, err := CompileValue(expr, set)
		require.NoError(t, err, expr)
		fields, ok := v.Reads()
		require.True(t, ok, "%s reads named fields only", expr)
		for _, raw := range partialRecords {
			full, err := DecodeRecord([]byte(raw), SignalLog)
			require.NoError(t, err)
			part, err := DecodeRecordFields([]byte(raw), SignalLog, fields)
			require.NoError(t, err)
			want, _ := v.String(context.Background(), full)
			got, _ := v.String(context.Background(), part)
			assert.Equal(t, want, got, "%s on %s", expr, raw)
		}
	}
	v, err := CompileValue(`event`, set)
	require.NoError(t, err)
	_, ok := v.Reads()
	assert.False(t, ok, "a value over the whole record needs it whole")
	v, err = CompileValue(``, set)
	require.NoError(t, err)
	fields, ok := v.Reads()
	assert.True(t, ok)
	assert.Empty(t, fields, "an empty expression reads nothing")
}
