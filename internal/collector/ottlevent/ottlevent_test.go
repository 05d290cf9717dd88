package ottlevent

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
)

// Records shaped as docs/contract.md#section-4 says the receiver puts them on the raw stream.
const (
	logRec = `{"resourceAttributes":{"service.name":"checkout","service.version":"2.14.3","deployment.environment":"production","host.name":"ip-10-0-12-34.eu-west-1.compute.internal","k8s.pod.name":"checkout-7d9f8b6c4-x2kqp"},` +
		`"scope":{"name":"github.com/acme/checkout/internal/payments","version":"1.0.0"},"severityNumber":17,"severityText":"ERROR",` +
		`"body":"payment failed: gateway timed out id=4711","attributes":{"order.id":"A-001001","http.method":"POST","http.status_code":504,"payment.amount":42.5,"payment.retry":true,"http.url":"https://api.acme.example/v1/payments/authorize"},` +
		`"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","timestamp":"2024-05-01T12:00:00.123456789Z"}`
	infoLogRec = `{"resourceAttributes":{"service.name":"cart"},"scope":{"name":"cart.logger"},"severityNumber":9,"severityText":"INFO",` +
		`"body":"{\"event\":\"login\",\"ms\":12.5}","attributes":{"user.id":42},"traceId":"","spanId":"","timestamp":"2024-05-01T12:00:01.000000000Z"}`
	spanRec = `{"resourceAttributes":{"service.name":"checkout"},"scope":{"name":"otelhttp"},"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","parentSpanId":"",` +
		`"name":"POST /pay","kind":"server","startTime":"2024-05-01T12:00:00.000000000Z","endTime":"2024-05-01T12:00:00.012500000Z","durationMs":12.5,` +
		`"status":{"code":"error","message":"upstream timed out"},"attributes":{"http.method":"POST","http.route":"/pay"},` +
		`"events":[{"name":"retry","timestamp":"2024-05-01T12:00:00.005000000Z","attributes":{"attempt":2}}]}`
	metricRec = `{"resourceAttributes":{"service.name":"checkout"},"scope":{"name":"otelhttp"},"name":"http.server.request.duration","description":"","unit":"s",` +
		`"type":"gauge","attributes":{"http.route":"/pay"},"timestamp":"2024-05-01T12:00:00.000000000Z","startTimestamp":"","value":0.25}`
	eventRec  = `{"order_id":"o-1001","status":"failed","amount":1250,"currency":"EUR","trace_id":"abc123","customer":{"id":"cus_9","tier":"gold"},"_event_type":"payment.failed","_source":"billing-api"}`
	sourceRec = `{"_event_type":"charge.failed","_source":"stripe","timestamp":"2024-05-01T12:00:00.000000000Z","text":"Charge ch_1 failed for cus_9","labels":{"customer":"cus_9"},` +
		`"payload":{"id":"evt_1","type":"charge.failed","data":{"object":{"id":"ch_1","amount":2000,"outcome":{"reason":"card_declined"}}}}}`
)

func settings() component.TelemetrySettings { return componenttest.NewNopTelemetrySettings() }

func decode(t testing.TB, js, signal string) *Record {
	t.Helper()
	r, err := DecodeRecord([]byte(js), signal)
	require.NoError(t, err)
	return r
}

func match(t *testing.T, expr, js, signal string) bool {
	t.Helper()
	c, err := CompileCondition(expr, settings())
	require.NoError(t, err, expr)
	ok, err := c.Match(context.Background(), decode(t, js, signal))
	require.NoError(t, err, expr)
	return ok
}

func TestConditions(t *testing.T) {
	tests := []struct {
		expr   string
		rec    string
		signal string
		want   bool
	}{
		{`severity_number >= 17 and resource_attributes["service.name"] == "checkout"`, logRec, SignalLog, true},
		{`severity_number >= 17 and resource_attributes["service.name"] == "checkout"`, infoLogRec, SignalLog, false},
		{`severity_number >= SEVERITY_NUMBER_ERROR`, logRec, SignalLog, true},
		{`severity_number >= SEVERITY_NUMBER_ERROR`, infoLogRec, SignalLog, false},
		{`event["_event_type"] == "payment.failed"`, eventRec, SignalEvent, true},
		{`event["_event_type"] == "payment.failed"`, sourceRec, SignalSource, false},
		{`status == "failed"`, eventRec, SignalEvent, true},
		{`status == "failed"`, spanRec, SignalSpan, false}, // an object is not that string
		{`status["code"] == "error"`, spanRec, SignalSpan, true},
		{`status["code"] == "error"`, eventRec, SignalEvent, false}, // a key into a string reads nil
		{`attributes["http.method"] == "POST"`, logRec, SignalLog, true},
		{`attributes["http.status_code"] >= 500`, logRec, SignalLog, true},
		{`attributes["payment.amount"] > 40`, logRec, SignalLog, true},
		{`attributes["payment.retry"] == true`, logRec, SignalLog, true},
		{`attributes["missing"] == nil`, logRec, SignalLog, true},
		{`IsMatch(body, "time(d)? ?out")`, logRec, SignalLog, true},
		{`IsMatch(body, "time(d)? ?out")`, infoLogRec, SignalLog, false},
		{`Len(attributes) > 2`, logRec, SignalLog, true},
		{`Len(attributes) > 2`, infoLogRec, SignalLog, false},
		{`event["durationMs"] > 10`, spanRec, SignalSpan, true},
		{`events[0]["attributes"]["attempt"] == 2`, spanRec, SignalSpan, true},
		{`events[5]["name"] == "retry"`, spanRec, SignalSpan, false}, // past the end reads nil
		{`name == "http.server.request.duration" and value > 0.2`, metricRec, SignalMetric, true},
		{`payload["data"]["object"]["outcome"]["reason"] == "card_declined"`, sourceRec, SignalSource, true},
		{`labels["customer"] == "cus_9" and IsMatch(text, "failed")`, sourceRec, SignalSource, true},
		{`signal == "source"`, sourceRec, SignalSource, true},
		{`signal == "log"`, sourceRec, SignalSource, false},
		{`customer["tier"] == "gold" and amount > 1000`, eventRec, SignalEvent, true},
		{`trace_id == "abc123"`, eventRec, SignalEvent, true}, // alias falls back to the field as written
		{`trace_id == "5b8efff798038103d269b633813fc60c"`, logRec, SignalLog, true},
		{`event.body == body and event.severity_number == 17`, logRec, SignalLog, true},
		{`event[event["_source"]] == nil`, eventRec, SignalEvent, true}, // dynamic key
		{`"stripe" == event["_source"]`, sourceRec, SignalSource, true},
		{`IsMap(event) and Len(event) == 9`, logRec, SignalLog, true},
		// Names OTTL's lexer cannot read as paths still mean event["name"].
		{`severityNumber >= 17 and resourceAttributes["service.name"] == "checkout"`, logRec, SignalLog, true},
		{`durationMs > 10 and event.durationMs < 13 and parentSpanId == ""`, spanRec, SignalSpan, true},
		{`_event_type == "payment.failed" and event._source == "billing-api"`, eventRec, SignalEvent, true},
		{`_event_type == "payment.failed"`, sourceRec, SignalSource, false},
		{`IsMatch(traceId, "^5b8e") and IsString(spanId)`, logRec, SignalLog, true},
		{`traceId == "_notRewritten"`, eventRec, SignalEvent, false}, // strings are left alone
		{``, eventRec, SignalEvent, true},
		{"  ", eventRec, SignalEvent, true},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			assert.Equal(t, tt.want, match(t, tt.expr, tt.rec, tt.signal))
		})
	}
}

func TestConditionDoesNotWrite(t *testing.T) {
	r := decode(t, logRec, SignalLog)
	for _, expr := range []string{`severity_number >= 17`, `IsMatch(body, "out")`, `Len(ParseJSON("{}")) == 0`, `event["a"]["b"] == nil`} {
		c, err := CompileCondition(expr, settings())
		require.NoError(t, err)
		_, err = c.Match(context.Background(), r)
		require.NoError(t, err)
	}
	assert.False(t, r.Changed())
	assert.JSONEq(t, logRec, string(r.AppendJSON(nil)))
	_, ok := r.Map().Get("a")
	assert.False(t, ok, "reading a missing path must not create it")
}

func TestConditionErrorIsNoMatch(t *testing.T) {
	c, err := CompileCondition(`ParseJSON(body)["event"] == "login"`, settings())
	require.NoError(t, err)
	ok, err := c.Match(context.Background(), decode(t, infoLogRec, SignalLog))
	require.NoError(t, err)
	assert.True(t, ok)

	ok, err = c.Match(context.Background(), decode(t, logRec, SignalLog)) // body is not JSON
	assert.Error(t, err)
	assert.False(t, ok)
}

func TestBarePathEqualsEventKey(t *testing.T) {
	recs := map[string]string{SignalLog: logRec, SignalSpan: spanRec, SignalMetric: metricRec, SignalEvent: eventRec, SignalSource: sourceRec}
	pairs := [][2]string{
		{`body`, `event["body"]`},
		{`status`, `event["status"]`},
		{`attributes["http.method"]`, `event["attributes"]["http.method"]`},
		{`event.attributes["http.method"]`, `event["attributes"]["http.method"]`},
		{`severity_number`, `event["severityNumber"]`},
		{`severity_text`, `event["severityText"]`},
		{`resource_attributes["service.name"]`, `event["resourceAttributes"]["service.name"]`},
		{`span_id`, `event["spanId"]`},
		{`payload["data"]["object"]["id"]`, `event["payload"]["data"]["object"]["id"]`},
		{`missing`, `event["missing"]`},
	}
	for signal, js := range recs {
		r := decode(t, js, signal)
		for _, p := range pairs {
			a, err := CompileValue(p[0], settings())
			require.NoError(t, err)
			b, err := CompileValue(p[1], settings())
			require.NoError(t, err)
			va, err := a.String(context.Background(), r)
			require.NoError(t, err)
			vb, err := b.String(context.Background(), r)
			require.NoError(t, err)
			assert.Equal(t, vb, va, "%s: %s vs %s", signal, p[0], p[1])

			c, err := CompileCondition(p[0]+" == "+p[1], settings())
			require.NoError(t, err)
			ok, err := c.Match(context.Background(), r)
			require.NoError(t, err)
			assert.True(t, ok, "%s: %s == %s", signal, p[0], p[1])
		}
	}
}

func TestAliasesReachCamelCaseFields(t *testing.T) {
	r := decode(t, logRec, SignalLog)
	for alias, want := range map[string]string{
		"severity_number":                     "17",
		"severity_text":                       "ERROR",
		`resource_attributes["k8s.pod.name"]`: "checkout-7d9f8b6c4-x2kqp",
		"trace_id":                            "5b8efff798038103d269b633813fc60c",
		"span_id":                             "eee19b7ec3c1b174",
		`event["severity_number"]`:            "", // inside event[...] names are literal
	} {
		v, err := CompileValue(alias, settings())
		require.NoError(t, err)
		got, err := v.String(context.Background(), r)
		require.NoError(t, err)
		assert.Equal(t, want, got, alias)
	}
}

func apply(t *testing.T, stmts []string, js, signal string) *Record {
	t.Helper()
	s, err := CompileStatements(stmts, settings())
	require.NoError(t, err)
	r := decode(t, js, signal)
	require.NoError(t, s.Apply(context.Background(), r))
	return r
}

func TestStatements(t *testing.T) {
	tests := []struct {
		name   string
		stmts  []string
		rec    string
		signal string
		want   string // exact JSON: key order is preserved...
		// ...except where a function builds a map from a Go map (ParseJSON).
		anyOrder bool
	}{
		{
			name:   "set from alias",
			stmts:  []string{`set(event["service"], resource_attributes["service.name"])`},
			rec:    `{"resourceAttributes":{"service.name":"checkout"},"severityNumber":17}`,
			signal: SignalLog,
			want:   `{"resourceAttributes":{"service.name":"checkout"},"severityNumber":17,"service":"checkout"}`,
		},
		{
			name:   "delete_key",
			stmts:  []string{`delete_key(event, "traceId")`},
			rec:    `{"body":"x","traceId":"5b8efff798038103d269b633813fc60c","spanId":""}`,
			signal: SignalLog,
			want:   `{"body":"x","spanId":""}`,
		},
		{
			name:   "keep_keys",
			stmts:  []string{`keep_keys(event, ["a","b"])`},
			rec:    `{"a":1,"z":2,"b":{"c":[1,2]},"d":null}`,
			signal: SignalEvent,
			want:   `{"a":1,"b":{"c":[1,2]}}`,
		},
		{
			name:     "merge_maps with ParseJSON",
			stmts:    []string{`merge_maps(event, ParseJSON(body), "upsert")`},
			rec:      `{"body":"{\"event\":\"login\",\"ms\":12.5,\"user\":{\"id\":42}}","event":"old"}`,
			signal:   SignalLog,
			want:     `{"body":"{\"event\":\"login\",\"ms\":12.5,\"user\":{\"id\":42}}","event":"login","ms":12.5,"user":{"id":42}}`,
			anyOrder: true,
		},
		{
			name:   "ExtractPatterns",
			stmts:  []string{`set(event["parsed"], ExtractPatterns(body, "id=(?P<id>\\d+)"))`},
			rec:    `{"body":"payment failed id=4711"}`,
			signal: SignalLog,
			want:   `{"body":"payment failed id=4711","parsed":{"id":"4711"}}`,
		},
		{
			name:   "set attribute",
			stmts:  []string{`set(attributes["x"], "y")`},
			rec:    `{"attributes":{"a":1}}`,
			signal: SignalSpan,
			want:   `{"attributes":{"a":1,"x":"y"}}`,
		},
		{
			name:   "set attribute creates attributes",
			stmts:  []string{`set(attributes["x"], "y")`},
			rec:    `{"status":"failed"}`,
			signal: SignalEvent,
			want:   `{"status":"failed","attributes":{"x":"y"}}`,
		},
		{
			name:   "set nested new path creates objects",
			stmts:  []string{`set(event["a"]["b"], 1)`},
			rec:    `{"z":true}`,
			signal: SignalEvent,
			want:   `{"z":true,"a":{"b":1}}`,
		},
		{
			name:   "set deep into payload",
			stmts:  []string{`set(payload["data"]["object"]["flag"], true)`, `set(event["n"], Len(payload["data"]["object"]))`},
			rec:    `{"payload":{"data":{"object":{"id":"ch_1"}}}}`,
			signal: SignalSource,
			want:   `{"payload":{"data":{"object":{"id":"ch_1","flag":true}}},"n":2}`,
		},
		{
			name:   "alias writes the camelCase field",
			stmts:  []string{`set(severity_text, "WARN")`, `set(trace_id, "")`},
			rec:    `{"severityText":"ERROR","traceId":"ab"}`,
			signal: SignalLog,
			want:   `{"severityText":"WARN","traceId":""}`,
		},
		{
			name:   "alias writes the snake_case field an event has",
			stmts:  []string{`set(trace_id, "zz")`},
			rec:    `{"trace_id":"abc"}`,
			signal: SignalEvent,
			want:   `{"trace_id":"zz"}`,
		},
		{
			name:   "where clause on signal",
			stmts:  []string{`set(event["kind"], "log") where signal == "log"`, `set(event["kind2"], "span") where signal == "span"`},
			rec:    `{}`,
			signal: SignalLog,
			want:   `{"kind":"log"}`,
		},
		{
			name:   "field named signal is event[signal]",
			stmts:  []string{`set(event["signal"], signal)`},
			rec:    `{"a":1}`,
			signal: SignalSource,
			want:   `{"a":1,"signal":"source"}`,
		},
		{
			name:   "set a list element and append",
			stmts:  []string{`set(event["tags"][1], "B")`, `append(event["tags"], "c")`},
			rec:    `{"tags":["a","b"]}`,
			signal: SignalEvent,
			want:   `{"tags":["a","B","c"]}`,
		},
		{
			name:   "replace the whole record",
			stmts:  []string{`set(event, payload)`},
			rec:    `{"_source":"x","payload":{"id":1,"n":{"m":2}}}`,
			signal: SignalSource,
			want:   `{"id":1,"n":{"m":2}}`,
		},
		{
			name:   "camelCase key via event",
			stmts:  []string{`set(event["durationMs"], event["durationMs"] * 1000)`},
			rec:    `{"durationMs":12.5}`,
			signal: SignalSpan,
			want:   `{"durationMs":12500}`,
		},
		{
			name:   "camelCase names",
			stmts:  []string{`set(severityText, "WARN") where severityNumber >= 17`, `set(event.durationMs, 1)`, `set(_event_type, "x")`},
			rec:    `{"severityNumber":17,"severityText":"ERROR"}`,
			signal: SignalLog,
			want:   `{"severityNumber":17,"severityText":"WARN","durationMs":1,"_event_type":"x"}`,
		},
		{
			name:   "explicit event prefix",
			stmts:  []string{`set(event.body, Concat([event.body, "!"], ""))`},
			rec:    `{"body":"hi"}`,
			signal: SignalLog,
			want:   `{"body":"hi!"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := apply(t, tt.stmts, tt.rec, tt.signal)
			assert.True(t, r.Changed())
			if tt.anyOrder {
				assert.JSONEq(t, tt.want, string(r.AppendJSON(nil)))
			} else {
				assert.Equal(t, tt.want, string(r.AppendJSON(nil)))
			}
		})
	}
}

func TestChanged(t *testing.T) {
	s, err := CompileStatements(nil, settings())
	require.NoError(t, err)
	r := decode(t, logRec, SignalLog)
	require.NoError(t, s.Apply(context.Background(), r))
	assert.False(t, r.Changed(), "no statements")

	r = apply(t, []string{`set(event["x"], 1) where severity_number < 5`}, logRec, SignalLog)
	assert.False(t, r.Changed(), "where clause false")

	r = apply(t, []string{`set(event["x"], 1) where severity_number >= 17`}, logRec, SignalLog)
	assert.True(t, r.Changed())
}

func TestStatementErrorsSkipOnlyThatStatement(t *testing.T) {
	s, err := CompileStatements([]string{
		`set(event["before"], 1)`,
		`merge_maps(event, ParseJSON(body), "upsert")`, // body is not JSON here
		`set(event["status"]["code"], 2)`,              // status is a string here
		`set(event["after"], 2)`,
	}, settings())
	require.NoError(t, err)
	r := decode(t, `{"body":"plain text","status":"failed"}`, SignalEvent)
	err = s.Apply(context.Background(), r)
	require.Error(t, err)
	var ee *EvalError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 1, ee.Index)
	assert.Contains(t, err.Error(), "statement 2")
	assert.Contains(t, err.Error(), "a str value has no keys")
	assert.Equal(t, `{"body":"plain text","status":"failed","before":1,"after":2}`, string(r.AppendJSON(nil)))
}

func TestSignalIsReadOnly(t *testing.T) {
	for _, stmt := range []string{
		`set(signal, "log")`,
		`set(event.signal, "log")`,
		`delete_key(signal, "x")`,
		`merge_maps(signal, ParseJSON("{}"), "upsert")`,
	} {
		_, err := CompileStatements([]string{`set(event["ok"], 1)`, stmt}, settings())
		var ce *CompileError
		require.ErrorAs(t, err, &ce, stmt)
		assert.Equal(t, 1, ce.Index)
		assert.ErrorIs(t, err, errSignalReadOnly, stmt)
		assert.Contains(t, err.Error(), "signal is read-only")
		assert.Positive(t, ce.Column, stmt)
	}
	// Direct use of the setter, as a function written outside ottlfuncs would.
	r := decode(t, `{}`, SignalLog)
	assert.ErrorIs(t, signalPath{}.Set(context.Background(), r, "x"), errSignalReadOnly)
	assert.Equal(t, SignalLog, r.Signal())
}

func TestGroupKey(t *testing.T) {
	tests := []struct {
		expr, rec, signal, want string
	}{
		{`trace_id`, logRec, SignalLog, "5b8efff798038103d269b633813fc60c"},
		{`event["traceId"]`, spanRec, SignalSpan, "5b8efff798038103d269b633813fc60c"},
		{`traceId`, spanRec, SignalSpan, "5b8efff798038103d269b633813fc60c"},
		{`traceId`, eventRec, SignalEvent, ""},
		{`_source`, sourceRec, SignalSource, "stripe"},
		{`resource_attributes["k8s.pod.name"]`, logRec, SignalLog, "checkout-7d9f8b6c4-x2kqp"},
		{`resource_attributes["k8s.pod.name"]`, spanRec, SignalSpan, ""},
		{`trace_id`, sourceRec, SignalSource, ""},
		{`payload["data"]["object"]["id"]`, sourceRec, SignalSource, "ch_1"},
		{`customer["id"]`, eventRec, SignalEvent, "cus_9"},
		{`amount`, eventRec, SignalEvent, "1250"},
		{`attributes["payment.amount"]`, logRec, SignalLog, "42.5"},
		{`attributes["payment.retry"]`, logRec, SignalLog, "true"},
		{`customer`, eventRec, SignalEvent, `{"id":"cus_9","tier":"gold"}`},
		{`Concat([resource_attributes["service.name"], attributes["http.method"]], "/")`, logRec, SignalLog, "checkout/POST"},
		{`signal`, metricRec, SignalMetric, "metric"},
		{``, logRec, SignalLog, ""},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			v, err := CompileValue(tt.expr, settings())
			require.NoError(t, err)
			r := decode(t, tt.rec, tt.signal)
			got, err := v.String(context.Background(), r)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.False(t, r.Changed())
		})
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		kind     string
		exprs    []string
		index    int
		line     int
		col      int
		contains []string
	}{
		// Triggers and context filters (CompileCondition).
		{KindCondition, []string{`severity_number >= and status == "x"`}, -1, 1, 20, []string{"invalid syntax at 1:20", "near `and status`"}},
		// Positions are the user's even where a camelCase name was rewritten.
		{KindCondition, []string{`durationMs > 10 and and`}, -1, 1, 21, []string{"invalid syntax at 1:21"}},
		{KindCondition, []string{"_event_type == \"x\"\n  or traceId == \"y\" or"}, -1, 2, 23, []string{"invalid syntax at 2:23"}},
		{KindCondition, []string{`status.errorCode == 1`}, -1, 1, 13, []string{"invalid syntax", `write status["errorCode"]`}},
		{KindCondition, []string{`Foo(body) == 1`}, -1, 1, 1, []string{`undefined function "Foo"`}},
		{KindCondition, []string{`status == "x" or log.body == "y"`}, -1, 1, 18, []string{`invalid path "log.body"`, `log["body"]`}},
		{KindCondition, []string{`severity_number > SEVERITY_NUMBER_LOUD`}, -1, 0, 0, []string{"SEVERITY_NUMBER_LOUD"}},
		// Transforms (CompileStatements): the failing statement's index.
		{KindStatement, []string{`set(event["a"], 1)`, `set(event["b"], 2`}, 1, 1, 18, []string{"statement 1", "invalid syntax at 1:18"}},
		{KindStatement, []string{`set(event["a"], 1)`, `delete_key(event, "x")`, `nope(event)`}, 2, 1, 1, []string{"statement 2", `undefined function "nope"`}},
		{KindStatement, []string{`set(attributes["x"], Concat(["a"], 1))`}, 0, 1, 22, []string{`call to "Concat"`, "expected string but got int64"}},
		{KindStatement, []string{`keep_keys(event, "a")`}, 0, 1, 1, []string{"must be a list of type StringGetter"}},
		{KindStatement, []string{`set(event, 1)`, ``}, 1, 0, 0, []string{"statement 1", "empty"}},
		// Group key (CompileValue).
		{KindValue, []string{`resource_attributes[`}, -1, 1, 21, []string{"invalid syntax at 1:21"}},
		{KindValue, []string{`traceId[`}, -1, 1, 9, []string{"invalid syntax at 1:9"}},
		{KindValue, []string{`Nope(body)`}, -1, 1, 1, []string{`undefined function "Nope"`}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.exprs, "; "), func(t *testing.T) {
			var err error
			switch tt.kind {
			case KindCondition:
				_, err = CompileCondition(tt.exprs[0], settings())
			case KindStatement:
				_, err = CompileStatements(tt.exprs, settings())
			case KindValue:
				_, err = CompileValue(tt.exprs[0], settings())
			}
			var ce *CompileError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tt.kind, ce.Kind)
			assert.Equal(t, tt.index, ce.Index)
			assert.Equal(t, tt.line, ce.Line, err.Error())
			assert.Equal(t, tt.col, ce.Column, err.Error())
			for _, s := range tt.contains {
				assert.Contains(t, err.Error(), s)
			}
			assert.NotContains(t, err.Error(), "github.com/", "no Go type names in user-facing errors")
		})
	}
}

func TestCompiledExpressionsAreSafeForConcurrentUse(t *testing.T) {
	c, err := CompileCondition(`severity_number >= 17 and IsMatch(body, "out")`, settings())
	require.NoError(t, err)
	s, err := CompileStatements([]string{`set(event["service"], resource_attributes["service.name"])`, `delete_key(event, "traceId")`}, settings())
	require.NoError(t, err)
	g, err := CompileValue(`span_id`, settings())
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				r := decode(t, logRec, SignalLog)
				ok, err := c.Match(context.Background(), r)
				assert.NoError(t, err)
				assert.True(t, ok)
				assert.NoError(t, s.Apply(context.Background(), r))
				k, err := g.String(context.Background(), r)
				assert.NoError(t, err)
				assert.Equal(t, "eee19b7ec3c1b174", k)
				var m map[string]any
				assert.NoError(t, json.Unmarshal(r.AppendJSON(nil), &m))
				assert.Equal(t, "checkout", m["service"])
				assert.NotContains(t, m, "traceId")
			}
		})
	}
	wg.Wait()
}

func TestCompileErrorUnwraps(t *testing.T) {
	_, err := CompileStatements([]string{`set(signal, "x")`}, settings())
	assert.True(t, errors.Is(err, errSignalReadOnly))
}

// Top-level fields are read through an index built at decode time; every way of
// changing the record must leave later reads right.
func TestReadsFollowWrites(t *testing.T) {
	cond := func(expr string) *Condition {
		c, err := CompileCondition(expr, settings())
		require.NoError(t, err)
		return c
	}
	ctx := context.Background()
	missing := cond(`trace_id == nil and severity_number == nil and body == "x"`)

	r := decode(t, logRec, SignalLog)
	s, err := CompileStatements([]string{`delete_key(event, "traceId")`, `delete_key(event, "severityNumber")`, `set(body, "x")`}, settings())
	require.NoError(t, err)
	require.NoError(t, s.Apply(ctx, r))
	ok, err := missing.Match(ctx, r)
	require.NoError(t, err)
	assert.True(t, ok)

	r = decode(t, logRec, SignalLog)
	r.Map().Remove("traceId")
	r.Map().Remove("severityNumber")
	r.Map().PutStr("body", "x")
	ok, err = missing.Match(ctx, r)
	require.NoError(t, err)
	assert.True(t, ok)

	r = decode(t, logRec, SignalLog)
	s, err = CompileStatements([]string{`keep_keys(event, ["body"])`, `set(event["severityNumber"], 3) where Len(event) == 1`}, settings())
	require.NoError(t, err)
	require.NoError(t, s.Apply(ctx, r))
	ok, err = cond(`severity_number == 3 and trace_id == nil and resource_attributes == nil`).Match(ctx, r)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, `{"body":"payment failed: gateway timed out id=4711","severityNumber":3}`, string(r.AppendJSON(nil)))

	// A record built by the caller is indexed too.
	m := decode(t, eventRec, SignalEvent).Map()
	ok, err = cond(`trace_id == "abc123" and status == "failed"`).Match(ctx, NewRecord(m, SignalEvent))
	require.NoError(t, err)
	assert.True(t, ok)
}
