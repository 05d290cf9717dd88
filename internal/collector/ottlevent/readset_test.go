package ottlevent

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
)

// Value expressions beside partialConditions: keys below keys, indexes, keys computed
// per record, and a field read both whole and by key.
var partialValues = []string{
	`resource_attributes["service.name"]`,
	`event["resource_attributes"]["service.name"]`,
	`Concat([status, _event_type], "/")`,
	`payload["data"]["object"]["outcome"]["reason"]`,
	`payload["data"]["list"][1]["x"]`,
	`attributes[resource_attributes["key"]]`,
	`Concat([nested["a"], String(Len(nested))], "-")`,
	`nested["c"]`,
}

var readSetRecords = append([]string{
	`{"resourceAttributes":{"service.name":"a","service.name":"b"},"resource_attributes":{"service.name":"snake","key":"k"},"attributes":{"k":"v"}}`,
	`{"payload":{"data":{"object":{"outcome":{"reason":"x"}},"list":[{"x":1},{"x":[2,{"y":"}"}]}]}},"payload":{"data":"last wins"}}`,
	`{"resourceAttributes":"not an object","nested":[1,2],"payload":{"data":{"object":[{"outcome":1}]}}}`,
	`{"resourceAttributes":{"service.name":{"deep":["\u00e9\"}"]}},"nested":{"a":"x","b":{"c":1},"c":null}}`,
	`{"resource\u005fattributes":{"service\u002ename":"escaped keys","key":"\u006b"},"attributes":{"k":"\u00e9"},"nested":{"a":"\ud83d\ude00"}}`,
	"{\"resourceAttributes\":{\"service.name\xff\":\"invalid utf-8 key\",\"service.name\":\"\xfe\"},\"status\":\"x\xff\"}",
}, partialRecords...)

func readSetExprs(t testing.TB) (conds []*Condition, values []*ValueExpr) {
	set := componenttest.NewNopTelemetrySettings()
	for _, expr := range partialConditions {
		c, err := CompileCondition(expr, set)
		require.NoError(t, err, expr)
		conds = append(conds, c)
	}
	for _, expr := range partialValues {
		v, err := CompileValue(expr, set)
		require.NoError(t, err, expr)
		values = append(values, v)
	}
	return conds, values
}

// checkReadSet fails when an expression answers differently on the record decoded as
// its read set (alone, and joined with every other expression's) than on the whole
// record.
func checkReadSet(t testing.TB, data []byte, conds []*Condition, values []*ValueExpr) {
	full, err := DecodeRecord(data, SignalLog)
	if err != nil {
		return // the stream holds valid objects only
	}
	ctx := context.Background()
	all := &ReadSet{}
	var sets []*ReadSet
	for _, c := range conds {
		s, ok := c.ReadSet()
		require.True(t, ok, c.String())
		sets = append(sets, s)
		all = all.Union(s)
	}
	for _, v := range values {
		s, ok := v.ReadSet()
		require.True(t, ok)
		sets = append(sets, s)
		all = s.Union(all)
	}
	decode := func(s *ReadSet) *Record {
		r, err := DecodeRecordReads(data, SignalLog, s)
		if err != nil {
			t.Fatalf("decoding what is read failed where the whole record did not: %v on %q", err, data)
		}
		return r
	}
	joined := decode(all)
	// Into a record that held another one before, as incident mode's scratch record.
	reused, err := DecodeRecordReadsInto(nil, []byte(readSetRecords[0]), SignalLog, all)
	require.NoError(t, err)
	if reused, err = DecodeRecordReadsInto(reused, data, SignalLog, all); err != nil {
		t.Fatalf("decoding into a used record failed where the whole record did not: %v on %q", err, data)
	}
	for i, c := range conds {
		want, _ := c.Match(ctx, full)
		for _, part := range []*Record{decode(sets[i]), joined, reused} {
			if got, _ := c.Match(ctx, part); got != want {
				t.Fatalf("%s: whole %v, decoded as read %v on %q", c.String(), want, got, data)
			}
		}
	}
	for i, v := range values {
		want, wantErr := v.String(ctx, full)
		for _, part := range []*Record{decode(sets[len(conds)+i]), joined, reused} {
			got, gotErr := v.String(ctx, part)
			if got != want || (gotErr == nil) != (wantErr == nil) {
				t.Fatalf("value %d: whole %q (%v), decoded as read %q (%v) on %q", i, want, wantErr, got, gotErr, data)
			}
		}
	}
}

func TestReadSetDecodeMatchesFullDecode(t *testing.T) {
	conds, values := readSetExprs(t)
	for _, raw := range readSetRecords {
		checkReadSet(t, []byte(raw), conds, values)
	}
}

func FuzzDecodeRecordReads(f *testing.F) {
	for _, r := range readSetRecords {
		f.Add([]byte(r))
	}
	conds, values := readSetExprs(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkReadSet(t, data, conds, values)
	})
}

// A key read of an object decodes that key only; the object read whole as well (by
// another expression, or by a converter over it) decodes whole.
func TestReadSetDecodesOnlyTheKeysRead(t *testing.T) {
	set := componenttest.NewNopTelemetrySettings()
	raw := []byte(`{"resourceAttributes":{"service.name":"checkout","k8s.pod.name":"p","host.name":"h"},"severityNumber":17,"body":"b"}`)
	fp, err := CompileValue(`resource_attributes["service.name"]`, set)
	require.NoError(t, err)
	trig, err := CompileCondition(`severity_number >= 17`, set)
	require.NoError(t, err)
	a, _ := fp.ReadSet()
	b, _ := trig.ReadSet()
	rec, err := DecodeRecordReads(raw, SignalLog, a.Union(b))
	require.NoError(t, err)
	m := rec.Map()
	assert.Equal(t, 2, m.Len(), "the fields read, not body")
	ra, ok := m.Get("resourceAttributes")
	require.True(t, ok)
	assert.Equal(t, map[string]any{"service.name": "checkout"}, ra.Map().AsRaw())

	whole, err := CompileCondition(`Len(resource_attributes) == 3`, set)
	require.NoError(t, err)
	c, _ := whole.ReadSet()
	rec, err = DecodeRecordReads(raw, SignalLog, a.Union(c))
	require.NoError(t, err)
	ra, _ = rec.Map().Get("resourceAttributes")
	assert.Equal(t, 3, ra.Map().Len())
	ok, err = whole.Match(context.Background(), rec)
	require.NoError(t, err)
	assert.True(t, ok)

	_, ok = mustCondition(t, `Len(event) > 2`).ReadSet()
	assert.False(t, ok, "a condition over the whole record needs it whole")
	s, ok := mustCondition(t, ``).ReadSet()
	require.True(t, ok)
	rec, err = DecodeRecordReads(raw, SignalLog, s)
	require.NoError(t, err)
	assert.Zero(t, rec.Map().Len(), "an empty condition reads nothing")
}

func mustCondition(t *testing.T, expr string) *Condition {
	c, err := CompileCondition(expr, componenttest.NewNopTelemetrySettings())
	require.NoError(t, err)
	return c
}

func BenchmarkDecodeRecordReads(b *testing.B) {
	raw := []byte(`{"timestamp":"2026-01-01T00:00:00Z","severity_number":9,"severity_text":"INFO","body":"upstream responded slowly, retrying with exponential backoff",` +
		`"resource_attributes":{"service.name":"checkout","k8s.pod.name":"pod-1234","k8s.namespace.name":"shop-production","host.name":"ip-10-0-1-2","deployment.environment":"production"},` +
		`"attributes":{"http.route":"/api/v1/orders","http.method":"GET","http.status_code":200,"user.id":"u-1","region":"eu-west-1","retry":0},` +
		`"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203331"}`)
	set := componenttest.NewNopTelemetrySettings()
	fp, err := CompileValue(`resource_attributes["service.name"]`, set)
	require.NoError(b, err)
	trig, err := CompileCondition(`severity_number >= 17`, set)
	require.NoError(b, err)
	fs, _ := fp.ReadSet()
	ts, _ := trig.ReadSet()
	reads := fs.Union(ts)
	fields := map[string]bool{}
	for _, r := range []func() (map[string]bool, bool){fp.Reads, trig.Reads} {
		f, _ := r()
		for k := range f {
			fields[k] = true
		}
	}
	b.Run("fields", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeRecordFields(raw, SignalLog, fields); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reads", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeRecordReads(raw, SignalLog, reads); err != nil {
				b.Fatal(err)
			}
		}
	})
}
