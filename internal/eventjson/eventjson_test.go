package eventjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestObject(t *testing.T) {
	obj, err := Object([]byte("  {\"big\": 12345678901234567890, \"n\": 1.50}\n"))
	require.NoError(t, err)
	assert.Equal(t, `{"big": 12345678901234567890, "n": 1.50}`, string(obj))

	for in, syntax := range map[string]bool{``: true, `{"a":`: true, `{} {}`: true, `[1]`: false, `"s"`: false, `null`: false} {
		_, err := Object([]byte(in))
		var e *Error
		require.True(t, errors.As(err, &e), "%q", in)
		assert.Equal(t, syntax, e.Syntax, "%q: %v", in, err)
		assert.Equal(t, -1, e.Index)
	}
}

func TestSplitNamesTheBadElement(t *testing.T) {
	_, err := Split([]byte(`[{}, {}, true]`), false, 0)
	var e *Error
	require.True(t, errors.As(err, &e))
	assert.Equal(t, 2, e.Index)
	assert.Equal(t, "element 2: a boolean is not a JSON object", err.Error())

	_, err = Split([]byte("{}\n\n  \n{\"a\":1}\n\"x\""), true, 0)
	require.True(t, errors.As(err, &e))
	assert.Equal(t, 2, e.Index, "blank lines are not elements")
	assert.Contains(t, err.Error(), "line 5")
}

func TestSplitByContent(t *testing.T) {
	objs, err := Split([]byte("{\"a\":1}\n{\"b\":2}"), false, 0) // JSON content type, NDJSON body
	require.NoError(t, err)
	assert.Len(t, objs, 2)
	objs, err = Split([]byte(`[ {"a" : 1} ,{"b":[1,2]}]`), false, 0)
	require.NoError(t, err)
	assert.Equal(t, []string{`{"a" : 1}`, `{"b":[1,2]}`}, []string{string(objs[0]), string(objs[1])})
}

func TestWithFields(t *testing.T) {
	f := []Field{{"_event_type", "deploy"}, {"_source", "ci"}}
	for in, want := range map[string]string{
		`{}`:                                 `{"_event_type":"deploy","_source":"ci"}`,
		`{ }`:                                `{ "_event_type":"deploy","_source":"ci"}`,
		`{"a": 1.50}`:                        `{"a": 1.50,"_event_type":"deploy","_source":"ci"}`,
		`{"_source":"x","a":1}`:              `{"a":1,"_event_type":"deploy","_source":"ci"}`,
		`{"a":1, "_event_type": {"n": 1}}`:   `{"a":1,"_event_type":"deploy","_source":"ci"}`,
		`{"_source":1,"_event_type":2}`:      `{"_event_type":"deploy","_source":"ci"}`,
		`{"s":"}","n":{"_source":"nested"}}`: `{"s":"}","n":{"_source":"nested"},"_event_type":"deploy","_source":"ci"}`,
	} {
		assert.Equal(t, want, string(WithFields([]byte(in), f...)), "%s", in)
	}
	assert.Equal(t, `{"a":1}`, string(WithFields([]byte(`{"a":1}`))))
	assert.Equal(t, `{"_event_type":"a\"b\u003c"}`, string(WithFields([]byte(`{}`), Field{"_event_type", `a"b<`})))
}

func FuzzObject(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,{"b":null}]}`, `[]`, `{"a":`, "\x00", `{"a":1}{"b":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		obj, err := Object(b)
		if err != nil {
			return
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(obj, &m); err != nil {
			t.Fatalf("accepted %q but it is not a JSON object: %v", obj, err)
		}
	})
}

func FuzzSplit(f *testing.F) {
	for _, s := range []string{`[{},{"a":1}]`, "{}\n{\"b\":[1]}\n", `[1]`, "{}\r\n\r\n{}", `[{"a":"]"}]`, `{"a":1} {"b":2}`} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, b []byte, ndjson bool) {
		objs, err := Split(b, ndjson, 0)
		if err != nil {
			return
		}
		if len(objs) == 0 {
			t.Fatal("no error and no element")
		}
		for i, o := range objs {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(o, &m); err != nil {
				t.Fatalf("element %d %q is not an object: %v", i, o, err)
			}
		}
		var arr []json.RawMessage
		if !ndjson && json.Unmarshal(b, &arr) == nil && len(arr) != len(objs) {
			t.Fatalf("array of %d split into %d", len(arr), len(objs))
		}
	})
}

func FuzzWithFields(f *testing.F) {
	for _, s := range []string{`{}`, `{"_event_type":1,"a":{"_source":2}}`, ` {"a" : "}" , "b":[{}]} `, `{"a":1,"a":2}`} {
		f.Add([]byte(s), "deploy", "ci")
	}
	f.Fuzz(func(t *testing.T, b []byte, typ, src string) {
		obj, err := Object(b)
		if err != nil {
			return
		}
		out := WithFields(obj, Field{"_event_type", typ}, Field{"_source", src})
		var got, before map[string]json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%q -> %q is not an object: %v", obj, out, err)
		}
		_ = json.Unmarshal(obj, &before)
		var gotType string
		_ = json.Unmarshal(got["_event_type"], &gotType)
		var wantType string
		enc, _ := json.Marshal(typ) // invalid UTF-8 is replaced, as in the output
		_ = json.Unmarshal(enc, &wantType)
		if gotType != wantType {
			t.Fatalf("_event_type %q, want %q", gotType, wantType)
		}
		for k, v := range before {
			if k == "_event_type" || k == "_source" {
				continue
			}
			if string(got[k]) != string(v) {
				t.Fatalf("member %q changed: %s -> %s", k, v, got[k])
			}
		}
	})
}

func TestObjects(t *testing.T) {
	pretty := "{\n  \"a\": 1,\n  \"b\": {\"c\": [1, 2]}\n}"
	for body, want := range map[string][]string{
		`{"a":1}`:                               {`{"a":1}`},
		"\n" + pretty + "\n":                    {pretty},
		`[{"a":1}, {"b":2},{}]`:                 {`{"a":1}`, `{"b":2}`, `{}`},
		"[\n {\"a\":1},\n {\"b\":2}\n]":         {`{"a":1}`, `{"b":2}`},
		"{\"a\":1}\n{\"b\":2}\r\n\n{\"c\":3}\n": {`{"a":1}`, `{"b":2}`, `{"c":3}`},
	} {
		objs, err := Objects([]byte(body), 0)
		require.NoError(t, err, "%q", body)
		var got []string
		for _, o := range objs {
			got = append(got, string(o))
		}
		assert.Equal(t, want, got, "%q", body)
	}
	for body, want := range map[string]struct {
		index  int
		syntax bool
	}{
		``:                        {-1, true},
		`[]`:                      {-1, false},
		`[{"a":1}, 2]`:            {1, false},
		`[{"a":1}, {]`:            {-1, true},
		"{\"a\":1}\n[1]\n":        {1, false},
		"{\"a\":1}\n{\"a\":1}\n{": {2, true},
		`"x"`:                     {0, false},
	} {
		_, err := Objects([]byte(body), 0)
		var ee *Error
		require.ErrorAs(t, err, &ee, "%q", body)
		assert.Equal(t, want.index, ee.Index, "%q: %v", body, err)
		assert.Equal(t, want.syntax, ee.Syntax, "%q: %v", body, err)
	}
}

func FuzzObjects(f *testing.F) {
	for _, s := range []string{`[{},{"a":1}]`, "{}\n{\"b\":[1]}\n", `[1]`, "{\n\"a\": 1\n}", `[{"a":"]"}]`, `{"a":1} {"b":2}`, "{\"a\":\n1}\n{}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		objs, err := Objects(b, 0)
		if err != nil {
			var ee *Error
			if !errors.As(err, &ee) || ee.Index < -1 || ee.Msg == "" {
				t.Fatalf("error %T %v", err, err)
			}
			return
		}
		if len(objs) == 0 {
			t.Fatal("no error and no element")
		}
		for i, o := range objs {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(o, &m); err != nil {
				t.Fatalf("element %d %q is not an object: %v", i, o, err)
			}
			if !bytes.Contains(b, o) {
				t.Fatalf("element %d %q is not bytes of the body", i, o)
			}
		}
		// A body that is one JSON value is read as that value.
		var v any
		if json.Unmarshal(b, &v) == nil {
			switch x := v.(type) {
			case map[string]any:
				if len(objs) != 1 {
					t.Fatalf("one object split into %d", len(objs))
				}
			case []any:
				if len(x) != len(objs) {
					t.Fatalf("array of %d split into %d", len(x), len(objs))
				}
			}
		}
	})
}

// A body of more objects than allowed fails as a whole, whatever its form, without
// splitting it all first.
func TestObjectLimit(t *testing.T) {
	three := map[string]func([]byte, int) ([][]byte, error){
		"Objects":       Objects,
		"Split":         func(b []byte, max int) ([][]byte, error) { return Split(b, false, max) },
		"Split, NDJSON": func(b []byte, max int) ([][]byte, error) { return Split(b, true, max) },
	}
	for name, split := range three {
		for _, body := range []string{`[{},{},{}]`, "{}\n{}\n{}\n"} {
			if name == "Split, NDJSON" && body[0] == '[' {
				continue
			}
			objs, err := split([]byte(body), 3)
			require.NoError(t, err, "%s %q", name, body)
			assert.Len(t, objs, 3)
			_, err = split([]byte(body), 2)
			var ee *Error
			require.ErrorAs(t, err, &ee, "%s %q", name, body)
			assert.Equal(t, 2, ee.Limit)
			assert.Equal(t, -1, ee.Index)
			assert.Equal(t, "the body holds more than 2 objects; send at most 2 per request", ee.Error())
		}
	}
	// The limit is met before a later element is even looked at.
	_, err := Objects([]byte("{}\n{}\nnot json"), 2)
	var ee *Error
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 2, ee.Limit)
	// Millions of objects are refused at the limit, not split first.
	huge := bytes.Repeat([]byte("{}\n"), 3<<20)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = Objects(huge, 10000)
	runtime.ReadMemStats(&after)
	require.ErrorAs(t, err, &ee)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(4<<20), "objects past the limit are never collected")
}
