package eventjson

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckRefusesWhatIsNotUTF8JSON(t *testing.T) {
	for body, want := range map[string]string{
		"{\"a\":\"\xff\"}":                         "invalid JSON at byte 6: invalid UTF-8",
		"{\"a\":\"ok\"}\n{\"b\":\"\xed\xa0\x80\"}": "invalid JSON at byte 17: invalid UTF-8", // a surrogate encoded as UTF-8
		`{"a":"\ud800"}`:                           `invalid JSON at byte 6: a lone UTF-16 surrogate \ud800`,
		`{"a":"\udc00\ud800"}`:                     `invalid JSON at byte 6: a lone UTF-16 surrogate \udc00`,
		`{"a":"x\uD83Dy"}`:                         `invalid JSON at byte 7: a lone UTF-16 surrogate \ud83d`,
		`{"a":"\ud83d\u0041"}`:                     `invalid JSON at byte 6: a lone UTF-16 surrogate \ud83d`,
		"{\"\xc0\xaf\":1}":                         "invalid JSON at byte 2: invalid UTF-8", // overlong
		strings.Repeat("[", MaxDepth+1):            "invalid JSON at byte 10000: the JSON nests deeper than 10000 levels",
	} {
		err := Check([]byte(body))
		var e *Error
		require.ErrorAs(t, err, &e, "%q", body)
		assert.True(t, e.Syntax)
		assert.Contains(t, err.Error(), want, "%q", body)
	}
	for _, body := range []string{
		`{"a":"\ud83d\ude00 \u00e9 é 😀 \"\\u0041"}`,
		`{"a":"\uFFFD", "b":"` + "\uFFFD" + `"}`,
		strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth),
		`{"brackets in strings":"[[[{{{"}`,
		`{"a":`, // a syntax error is the parser's to report
	} {
		assert.NoError(t, Check([]byte(body)), "%q", body)
	}
}

// Every path refuses the same way: Object, Split (array and NDJSON) and Objects.
func TestEveryParserAppliesCheck(t *testing.T) {
	bad := map[string][]byte{"utf8": []byte("{\"a\":\"\xff\"}"), "surrogate": []byte(`{"a":"\udfff"}`), "depth": []byte(`{"a":` + strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth) + `}`)}
	for name, obj := range bad {
		parsers := map[string]func() error{
			"Object":        func() error { _, err := Object(obj); return err },
			"Split array":   func() error { _, err := Split(append(append([]byte(`[{},`), obj...), ']'), false, 0); return err },
			"Split NDJSON":  func() error { _, err := Split(append([]byte("{}\n"), obj...), true, 0); return err },
			"Objects":       func() error { _, err := Objects(obj, 0); return err },
			"Objects array": func() error { _, err := Objects(append(append([]byte(`[`), obj...), ']'), 0); return err },
		}
		for pname, parse := range parsers {
			err := parse()
			var e *Error
			require.ErrorAs(t, err, &e, "%s %s", name, pname)
			assert.True(t, e.Syntax, "%s %s", name, pname)
			assert.Contains(t, err.Error(), "invalid JSON at byte", "%s %s", name, pname)
		}
	}
}

// Whatever Check accepts, encoding/json decodes without replacing anything: a valid
// document's strings come back exactly as valid UTF-8.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"a":"\ud83d\ude00"}`, "{\"a\":\"\xff\"}", `["\ud800"]`, `[[[[]]]]`, `"\\"`, `{"a":"\u00e9\"\\"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := Check(b); err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error %T", err)
			}
			return
		}
		var v any
		if json.Unmarshal(b, &v) != nil {
			return
		}
		if !utf8.Valid(b) {
			t.Fatalf("accepted invalid UTF-8 %q", b)
		}
		if strings.Contains(mustMarshal(t, v), `\ufffd`) && !strings.Contains(strings.ToLower(string(b)), `\ufffd`) && !strings.Contains(string(b), "\uFFFD") {
			t.Fatalf("accepted %q, which decodes with replacement characters", b)
		}
	})
}

func mustMarshal(t *testing.T, v any) string {
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(out), "\uFFFD", `\ufffd`)
}
