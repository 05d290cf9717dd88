package ingestreceiver

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzResultText feeds what an agent posts as a result (any bytes: JSON or not, any
// encoding, any size) to what an incident keeps of it: it never panics, and the text is
// valid UTF-8 of at most maxResultText characters, with a readable text, summary or
// message field taken as it is.
func FuzzResultText(f *testing.F) {
	for _, s := range []string{
		`{"text":"Root cause: the db-1 disk is full"}`,
		`{"summary":"  ","message":"restart the pod"}`,
		`{"text":42,"summary":{"a":1},"message":"fallback"}`,
		`"a bare string result"`,
		`"   "`,
		`{"findings":[1,2,3],  "ok": true}`,
		`[1, 2, 3]`, `null`, `{`, ``, `{"text":"\ud800"}`,
		"{\"text\":\"\xff\xfe\"}", "\xff\xfe\xfd not JSON",
		`{"text":"` + strings.Repeat("é", 600) + `"}`,
		strings.Repeat(`{"a":`, 200) + strings.Repeat(`}`, 200),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		got := resultText(payload)
		if !utf8.ValidString(got) {
			t.Fatalf("%q is not valid UTF-8", got)
		}
		if n := utf8.RuneCountInString(got); n > maxResultText {
			t.Fatalf("%d characters, more than %d", n, maxResultText)
		}
		if utf8.Valid(payload) && len(payload) > 0 && strings.TrimSpace(string(payload)) != "" && got == "" {
			t.Fatalf("a non-empty result %q shows as nothing", payload)
		}
	})
}
