package textfmt

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOneLine(t *testing.T) {
	assert.Equal(t, "db down on primary", OneLine(" db\tdown\n\non\u202e primary\r\n", 100))
	assert.Equal(t, "abcd…", OneLine("abcdefgh", 5))
	assert.Equal(t, "é…", OneLine("éééé", 2), "cut by characters")
	assert.Equal(t, "", OneLine(" \n ", 10))
}

func text(t *testing.T, platform string, body []byte) string {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(body, &m))
	switch platform {
	case Discord:
		return m["content"].(string)
	case Teams:
		card := m["attachments"].([]any)[0].(map[string]any)["content"].(map[string]any)
		return card["body"].([]any)[0].(map[string]any)["text"].(string)
	}
	return m["text"].(string)
}

// An incident's result is titled with the incident on every platform, and the title (an
// event's text) pings nobody and links nowhere.
func TestChatBodyTitled(t *testing.T) {
	payload := []byte(`{"text":"restarted the pod"}`)
	doc, _ := Decode(payload)
	b, err := ChatBodyTitled(Slack, "<!channel> db <https://evil.example|down>", "", payload, doc, "", "")
	require.NoError(t, err)
	assert.Equal(t, "[&lt;!channel&gt; db &lt;https://evil.example|down&gt;] restarted the pod", text(t, Slack, b))

	for _, p := range []string{Discord, Teams} {
		b, err = ChatBodyTitled(p, "[click](https://evil.example) db", "", payload, doc, "", "")
		require.NoError(t, err)
		got := text(t, p, b)
		assert.Equal(t, "[(click)(https://evil.example) db] restarted the pod", got, p)
	}

	// A JSON result is titled outside its code block.
	raw := []byte(`{"a":1}`)
	doc, _ = Decode(raw)
	b, err = ChatBodyTitled(Slack, "db down", "", raw, doc, "", "")
	require.NoError(t, err)
	assert.Equal(t, "[db down] ```\n{\"a\":1}\n```", text(t, Slack, b))

	untitled, err := ChatBodyWithLink(Slack, "", raw, doc, "", "")
	require.NoError(t, err)
	assert.Equal(t, "```\n{\"a\":1}\n```", text(t, Slack, untitled), "no title, no prefix")
}

// A result cut to the platform's size keeps its title and its link.
func TestChatBodyTitledKeepsTheTitleWhenCut(t *testing.T) {
	payload, _ := json.Marshal(map[string]string{"text": strings.Repeat("x", 30000)})
	doc, _ := Decode(payload)
	for _, p := range []string{Slack, Discord, Teams} {
		b, err := ChatBodyTitled(p, "db down", "", payload, doc, "View", "https://dash.example/d")
		require.NoError(t, err)
		got := text(t, p, b)
		assert.True(t, strings.HasPrefix(got, "[db down] xxx"), p)
		assert.True(t, strings.Contains(got, "…"), p)
		assert.True(t, strings.HasSuffix(got, "https://dash.example/d)") || strings.HasSuffix(got, "https://dash.example/d|View>"), p)
		if lim := limits[p]; lim.chars > 0 {
			assert.LessOrEqual(t, utf8.RuneCountInString(got), lim.chars, p)
		}
		assert.LessOrEqual(t, len(b), limits[p].bytes, p)
	}
}

func TestSlackText(t *testing.T) {
	payload := []byte(`{"text":"<@U1> see <https://x|y>"}`)
	doc, _ := Decode(payload)
	got, err := SlackText("db", "", payload, doc, "View", "https://dash.example/d")
	require.NoError(t, err)
	assert.Equal(t, "[db] &lt;@U1&gt; see &lt;https://x|y&gt;\n<https://dash.example/d|View>", got)
}

// Titles come from events: whatever one holds, the prefix is one line in brackets, the
// Slack one has no control sequence, the Markdown one no link.
func FuzzTitlePrefix(f *testing.F) {
	for _, s := range []string{"db down", "<!here>", "[a](http://x)", "a\n\u202eb", "]]((", strings.Repeat("é", 300)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, title string) {
		for _, p := range []string{Slack, Discord, Teams} {
			got := titlePrefix(p, title)
			if got == "" {
				continue
			}
			assert.True(t, strings.HasPrefix(got, "[") && strings.HasSuffix(got, "] "), got)
			inner := got[1 : len(got)-2]
			assert.NotContains(t, inner, "\n")
			assert.True(t, utf8.ValidString(got))
			if p == Slack {
				assert.NotContains(t, inner, "<")
				assert.NotContains(t, inner, ">")
			} else {
				assert.NotContains(t, inner, "[")
				assert.NotContains(t, inner, "]")
			}
			assert.Equal(t, -1, strings.IndexFunc(got, isBidiControl))
		}
	})
}
