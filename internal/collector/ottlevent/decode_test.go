package ottlevent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

func TestDecodeValues(t *testing.T) {
	r := decode(t, `{"i":1,"neg":-42,"negzero":-0,"frac":1.50,"exp":1e3,"big":12345678901234567890,`+
		`"min":-9223372036854775808,"max":9223372036854775807,"over":9223372036854775808,"digits18":123456789012345678,`+
		`"inf":1e400,"ninf":-1e400,"tiny":1e-400,"s":"x","t":true,"f":false,"n":null,"a":[1,"two",[],{}],"o":{"k":{"l":[null]}}}`, SignalEvent)
	m := r.Map()
	get := func(k string) pcommon.Value {
		v, ok := m.Get(k)
		require.True(t, ok, k)
		return v
	}
	assert.Equal(t, int64(1), get("i").Int())
	assert.Equal(t, int64(-42), get("neg").Int())
	assert.Equal(t, pcommon.ValueTypeInt, get("negzero").Type())
	assert.Equal(t, 1.5, get("frac").Double())
	assert.Equal(t, 1000.0, get("exp").Double())
	assert.Equal(t, 12345678901234567890.0, get("big").Double())
	assert.Equal(t, int64(math.MinInt64), get("min").Int())
	assert.Equal(t, int64(math.MaxInt64), get("max").Int())
	assert.Equal(t, pcommon.ValueTypeDouble, get("over").Type())
	assert.Equal(t, int64(123456789012345678), get("digits18").Int())
	assert.True(t, math.IsInf(get("inf").Double(), 1))
	assert.True(t, math.IsInf(get("ninf").Double(), -1))
	assert.Equal(t, 0.0, get("tiny").Double())
	assert.Equal(t, "x", get("s").Str())
	assert.True(t, get("t").Bool())
	assert.False(t, get("f").Bool())
	assert.Equal(t, pcommon.ValueTypeEmpty, get("n").Type())
	assert.Equal(t, []any{int64(1), "two", []any{}, map[string]any{}}, get("a").Slice().AsRaw())
	assert.Equal(t, map[string]any{"k": map[string]any{"l": []any{nil}}}, get("o").Map().AsRaw())

	assert.Equal(t, `{"i":1,"neg":-42,"negzero":0,"frac":1.5,"exp":1000,"big":12345678901234567000,`+
		`"min":-9223372036854775808,"max":9223372036854775807,"over":9223372036854776000,"digits18":123456789012345678,`+
		`"inf":"Infinity","ninf":"-Infinity","tiny":0,"s":"x","t":true,"f":false,"n":null,"a":[1,"two",[],{}],"o":{"k":{"l":[null]}}}`,
		string(r.AppendJSON(nil)))
}

func TestDecodeStrings(t *testing.T) {
	tests := map[string]string{
		`"plain"`:                    "plain",
		`"q\"b\\s\/n\nt\tr\rb\bf\f"`: "q\"b\\s/n\nt\tr\rb\bf\f",
		`"\u00e9t\u00C9"`:            "étÉ",
		`"\ud83d\ude00"`:             "😀",
		`"\ud800"`:                   "\uFFFD",
		`"\ud800x"`:                  "\uFFFDx",
		`"\ud800\u0041"`:             "\uFFFDA",
		`"\udc00\ud800"`:             "\uFFFD\uFFFD",
		"\"bad\xffbyte\"":            "bad\uFFFDbyte",
		"\"bad\xff\\n\"":             "bad\uFFFD\n",
		`"世界 🎉"`:                     "世界 🎉",
		`""`:                         "",
		"\"\u2028\"":                 "\u2028",
	}
	for in, want := range tests {
		r := decode(t, `{"k":`+in+`,`+in+`:1}`, SignalEvent)
		v, ok := r.Map().Get("k")
		require.True(t, ok)
		assert.Equal(t, want, v.Str(), in)
		_, ok = r.Map().Get(want)
		assert.True(t, ok, "key %s", in)

		var ref map[string]any
		require.NoError(t, json.Unmarshal([]byte(`{"k":`+in+`}`), &ref))
		assert.Equal(t, ref["k"], v.Str(), "as encoding/json: %s", in)
	}
}

func TestDecodeDuplicateKeysKeepTheLast(t *testing.T) {
	r := decode(t, `{"a":1,"b":2,"a":{"x":3},"c":[{"d":1,"d":2}]}`, SignalEvent)
	assert.Equal(t, `{"b":2,"a":{"x":3},"c":[{"d":2}]}`, string(r.AppendJSON(nil)))

	// Past the linear scan: the map-based path.
	var b strings.Builder
	b.WriteString("{")
	for i := range 40 {
		fmt.Fprintf(&b, `"k%d":%d,`, i%30, i)
	}
	b.WriteString(`"end":true}`)
	r = decode(t, b.String(), SignalEvent)
	var want map[string]any
	require.NoError(t, json.Unmarshal([]byte(b.String()), &want))
	var got map[string]any
	require.NoError(t, json.Unmarshal(r.AppendJSON(nil), &got))
	assert.Equal(t, want, got)
	assert.Equal(t, 31, r.Map().Len())
}

func TestDecodeLargeObjectIsNotQuadratic(t *testing.T) {
	// 100k keys: with a search per insertion this takes many seconds.
	var b bytes.Buffer
	b.WriteString("{")
	for i := range 100_000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"key-%d":%d`, i, i)
	}
	b.WriteString("}")
	r := decode(t, b.String(), SignalEvent)
	assert.Equal(t, 100_000, r.Map().Len())
	assert.Equal(t, b.String(), string(r.AppendJSON(nil)))
}

func TestDecodeErrors(t *testing.T) {
	for _, in := range []string{
		``, ` `, `[]`, `"s"`, `1`, `null`, `{`, `{"a"`, `{"a":}`, `{"a":1,}`, `{,}`, `{"a":1 "b":2}`,
		`{"a":01}`, `{"a":-}`, `{"a":1.}`, `{"a":.5}`, `{"a":1e}`, `{"a":1e+}`, `{"a":+1}`, `{"a":0x10}`,
		`{"a":tru}`, `{"a":nul}`, `{"a":True}`, `{"a":NaN}`, `{"a":Infinity}`,
		`{"a":1} x`, `{"a":1}{}`, `{'a':1}`, `{a:1}`, "{\"a\":\"x\x01\"}", `{"a":"\x"}`, `{"a":"\u12"}`,
		`{"a":"unterminated}`, `{"a":[1,]}`, `{"a":[1 2]}`, `{"a":[}`,
		strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001),
	} {
		_, err := DecodeRecord([]byte(in), SignalEvent)
		var se *SyntaxError
		assert.ErrorAs(t, err, &se, "%q", in)
		if len(in) < 100 {
			assert.False(t, json.Valid([]byte(in)) && strings.HasPrefix(strings.TrimSpace(in), "{"), "encoding/json accepts %q", in)
		}
	}
	// The deepest nesting encoding/json accepts decodes too.
	deep := strings.Repeat(`{"a":`, 9999) + "[1]" + strings.Repeat("}", 9999)
	require.True(t, json.Valid([]byte(deep)))
	_, err := DecodeRecord([]byte(deep), SignalEvent)
	assert.NoError(t, err)
}

func TestDecodeWhitespace(t *testing.T) {
	r := decode(t, " \t\r\n{ \"a\" : [ 1 , { } ] , \"b\" :\nnull }\n ", SignalEvent)
	assert.Equal(t, `{"a":[1,{}],"b":null}`, string(r.AppendJSON(nil)))
}

func TestDecodeCopiesInput(t *testing.T) {
	in := []byte(`{"traceId":"ab","custom key":"value","n":12.5}`)
	r, err := DecodeRecord(in, SignalLog)
	require.NoError(t, err)
	for i := range in {
		in[i] = 'X'
	}
	assert.Equal(t, `{"traceId":"ab","custom key":"value","n":12.5}`, string(r.AppendJSON(nil)))
}

func FuzzDecodeRecord(f *testing.F) {
	for _, s := range []string{
		logRec, infoLogRec, spanRec, metricRec, eventRec, sourceRec,
		`{}`, `{"a":{"b":[1,2.5,-0,1e400,-1e400,1e-400,12345678901234567890,9223372036854775807,-9223372036854775808]}}`,
		`{"s":"\ud83d\ude00\ud800\u00e9\n\"\\\/","a":1,"a":2}`, "{\"bad\xff\":\"\xed\xa0\x80\"}",
		`{"n":null,"t":true,"f":false,"e":[],"o":{}}`, `{"a":01}`, `[1]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want any
		var refErr error
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if !json.Valid(data) {
			// json.Valid also refuses trailing data, which Decode would leave unread.
			refErr = fmt.Errorf("invalid JSON")
		} else {
			refErr = dec.Decode(&want)
		}
		_, isObject := want.(map[string]any)

		r, err := DecodeRecord(data, SignalEvent)
		if err != nil {
			if refErr == nil && isObject {
				t.Fatalf("encoding/json accepts %q, DecodeRecord: %v", data, err)
			}
			return
		}
		if refErr != nil || !isObject {
			t.Fatalf("DecodeRecord accepts %q, encoding/json does not (%v)", data, refErr)
		}
		out := r.AppendJSON(nil)
		if !json.Valid(out) {
			t.Fatalf("%q -> invalid JSON %q", data, out)
		}
		var got any
		dec = json.NewDecoder(bytes.NewReader(out))
		dec.UseNumber()
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("%q -> %q: %v", data, out, err)
		}
		if path, ok := sameJSON(want, got, "$"); !ok {
			t.Fatalf("%q -> %q differ at %s", data, out, path)
		}
	})
}

// sameJSON compares decoded JSON values, numbers modulo formatting: integers that
// fit int64 must be identical, other numbers must be the same float64, and numbers
// beyond float64 must have become "Infinity" or "-Infinity" (see DecodeRecord).
func sameJSON(want, got any, path string) (string, bool) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			return path, false
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				return path + "." + k, false
			}
			if p, ok := sameJSON(wv, gv, path+"."+k); !ok {
				return p, false
			}
		}
		return "", true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return path, false
		}
		for i := range w {
			if p, ok := sameJSON(w[i], g[i], fmt.Sprintf("%s[%d]", path, i)); !ok {
				return p, false
			}
		}
		return "", true
	case json.Number:
		if wf, err := strconv.ParseFloat(string(w), 64); err != nil && math.IsInf(wf, 0) {
			want := "Infinity"
			if wf < 0 {
				want = "-Infinity"
			}
			return path, got == want
		}
		g, ok := got.(json.Number)
		if !ok {
			return path, false
		}
		if wi, err := strconv.ParseInt(string(w), 10, 64); err == nil {
			gi, err := strconv.ParseInt(string(g), 10, 64)
			return path, err == nil && gi == wi
		}
		wf, _ := strconv.ParseFloat(string(w), 64)
		gf, err := strconv.ParseFloat(string(g), 64)
		return path, err == nil && gf == wf
	default:
		return path, want == got
	}
}
