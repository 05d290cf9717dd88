package textfmt

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const deliveryLink = "https://cp.example.com/projects/p1/deliveries?delivery=snk_0123"

// A chat message's link to its delivery is the service's line: in the platform's link
// syntax, after the text, and kept whole when a long text is cut.
func TestChatLinkLineIsKeptWhenCut(t *testing.T) {
	long, _ := json.Marshal(map[string]string{"text": strings.Repeat("é", 50_000)})
	for platform, want := range map[string]string{
		Slack:   "\n<" + deliveryLink + "|View this delivery>",
		Discord: "\n[View this delivery](" + deliveryLink + ")",
		Teams:   "\n[View this delivery](" + deliveryLink + ")",
	} {
		for _, payload := range [][]byte{[]byte(`{"text":"disk full"}`), long} {
			doc, err := Decode(payload)
			require.NoError(t, err)
			b, err := ChatBodyWithLink(platform, "", payload, doc, "View this delivery", deliveryLink)
			require.NoError(t, err)
			assert.LessOrEqual(t, len(b), limits[platform].bytes, platform)
			got := chatText(t, platform, b)
			assert.True(t, strings.HasSuffix(got, want), "%s: %q", platform, got[max(0, len(got)-200):])
			if len(payload) > 100 {
				assert.True(t, strings.HasSuffix(got, "…"+want), "%s: the text is cut before the link", platform)
			}
		}
	}
	b, err := ChatBodyWithLink(Slack, "", []byte(`{"text":"hi"}`), map[string]any{"text": "hi"}, "View", "")
	require.NoError(t, err)
	assert.JSONEq(t, `{"text":"hi"}`, string(b), "no link, no line")
}

// Whatever the text, a message with a link stays within the platform's limits and ends
// with the whole link line.
func FuzzChatBodyWithLink(f *testing.F) {
	f.Add("{text}", "<!channel> & <b>x</b>", uint16(1))
	f.Add("", "漢", uint16(12500))
	f.Add("{text}", "```", uint16(5000))
	f.Add("[x]({text})", "[click](https://evil.example)\u202e", uint16(2))
	f.Fuzz(func(t *testing.T, tpl, value string, repeat uint16) {
		if len(value)*int(repeat) > 32<<10 {
			return
		}
		payload, _ := json.Marshal(map[string]string{"text": strings.Repeat(value, int(repeat))})
		doc, err := Decode(payload)
		if err != nil {
			t.Fatal(err)
		}
		for platform, lim := range limits {
			b, err := ChatBodyWithLink(platform, tpl, payload, doc, "View this delivery", deliveryLink)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) > lim.bytes {
				t.Fatalf("%s body of %d bytes, over %d", platform, len(b), lim.bytes)
			}
			got := chatText(t, platform, b)
			if lim.chars > 0 && utf8.RuneCountInString(got) > lim.chars {
				t.Fatalf("%s text of %d characters", platform, utf8.RuneCountInString(got))
			}
			if !strings.HasSuffix(got, linkLine(platform, "View this delivery", deliveryLink)) {
				t.Fatalf("%s text lost its link line: %q", platform, got)
			}
		}
	})
}
