package textfmt

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const push = `{"action":"opened","repo":{"name":"shop","stars":12345678901234567890},"amount":1.50,
	"labels":["bug","p1"],"sender":null,"pr":{"head":{"sha":"abc"}}}`

func TestRender(t *testing.T) {
	doc, err := Decode([]byte(push))
	require.NoError(t, err)
	for tpl, want := range map[string]string{
		"{repo.name}: {action}":               "shop: opened",
		"stars {repo.stars}, amount {amount}": "stars 12345678901234567890, amount 1.50",
		"{labels.1} {labels}":                 `p1 ["bug","p1"]`,
		"{ pr.head.sha }":                     "abc",
		"by {sender}":                         "by ",
		"{{literal}} {action}":                "{literal} opened",
		"unclosed {action":                    "unclosed {action",
		"":                                    "",
	} {
		got, _ := Render(tpl, doc)
		assert.Equal(t, want, got, tpl)
	}
	got, missing := Render("{repo.owner} did {action} on {nope}", doc)
	assert.Equal(t, " did opened on ", got, "a missing field renders empty")
	assert.Equal(t, []string{"repo.owner", "nope"}, missing)
	assert.Equal(t, []string{"repo.name", "action"}, Placeholders("{repo.name}: {action} {{x}}"))
}

func TestResolve(t *testing.T) {
	doc, _ := Decode([]byte(push))
	v, ok := Resolve(doc, "repo.name")
	assert.True(t, ok)
	assert.Equal(t, "shop", v)
	for _, p := range []string{"", "repo.name.x", "labels.9", "labels.-1", "nope", "repo..name"} {
		_, ok := Resolve(doc, p)
		assert.False(t, ok, p)
	}
}

func TestChat(t *testing.T) {
	for u, want := range map[string]string{
		"https://hooks.slack.com/services/T/B/X":               Slack,
		"https://discord.com/api/webhooks/1/abc":               Discord,
		"https://prod-01.westus.logic.azure.com/workflows/x":   Teams,
		"https://acme.webhook.office.com/webhookb2/x":          Teams,
		"https://default1.environment.api.powerplatform.com/x": Teams,
		"https://chat.example.com/hook":                        Slack,
	} {
		assert.Equal(t, want, Platform("auto", u), u)
	}
	assert.Equal(t, Discord, Platform("discord", "https://hooks.slack.com/x"), "an explicit format wins")

}

// chatText is the text a platform shows from a body ChatBody made.
func chatText(t testing.TB, platform string, body []byte) string {
	var b struct {
		Text        string
		Content     string
		Attachments []struct {
			Content struct {
				Body []struct{ Text string }
			}
		}
	}
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatalf("%s body is not JSON: %v: %q", platform, err, body)
	}
	switch platform {
	case Discord:
		return b.Content
	case Teams:
		if len(b.Attachments) != 1 || len(b.Attachments[0].Content.Body) != 1 {
			t.Fatalf("a Teams body holds one card with one text block: %s", body)
		}
		return b.Attachments[0].Content.Body[0].Text
	}
	return b.Text
}

func chatBody(t testing.TB, platform, tpl, payload string) ([]byte, string) {
	doc, err := Decode([]byte(payload))
	require.NoError(t, err)
	b, err := ChatBody(platform, tpl, []byte(payload), doc)
	require.NoError(t, err)
	return b, chatText(t, platform, b)
}

func TestChatDefaultText(t *testing.T) {
	_, text := chatBody(t, Slack, "", `{"summary":"checkout is failing","n":1}`)
	assert.Equal(t, "checkout is failing", text)
	_, text = chatBody(t, Discord, "", `{"z": 1.50, "a": [1, 2], "s": "a`+"```"+`b"}`)
	assert.Equal(t, "```\n{\"z\":1.50,\"a\":[1,2],\"s\":\"a\\u0060\\u0060\\u0060b\"}\n```", text,
		"compact, numbers and key order as sent; a value cannot close the code block")
	b, _ := chatBody(t, Slack, "", `{"text":"hi"}`)
	assert.JSONEq(t, `{"text":"hi"}`, string(b))
	b, text = chatBody(t, Teams, "", `{"text":"hi"}`)
	assert.Contains(t, string(b), `"type":"AdaptiveCard"`)
	assert.Equal(t, "hi", text)
}

func TestChatSlackEscapesPayloadText(t *testing.T) {
	const hostile = `{"text":"<!channel> <@U123> & <b>x</b>","who":"<!everyone>"}`
	_, text := chatBody(t, Slack, "", hostile)
	assert.Equal(t, "&lt;!channel&gt; &lt;@U123&gt; &amp; &lt;b&gt;x&lt;/b&gt;", text, "renders literally, pings nobody")
	_, text = chatBody(t, Slack, "<!here> {who} says: {text}", hostile)
	assert.Equal(t, "<!here> &lt;!everyone&gt; says: &lt;!channel&gt; &lt;@U123&gt; &amp; &lt;b&gt;x&lt;/b&gt;", text,
		"a mention written in the template is kept, substituted values are escaped")
	_, text = chatBody(t, Slack, "<{url}|details>", `{"url":"https://ci.example.com/run?id=1&attempt=2"}`)
	assert.Equal(t, "details (<https://ci.example.com/run?id=1&amp;attempt=2>)", text,
		"a template links to a payload's URL, shown with the address")
	_, text = chatBody(t, Slack, "<https://status.example.com|status> {text}", `{"text":"down"}`)
	assert.Equal(t, "<https://status.example.com|status> down", text, "a link the template writes in full is kept")
	_, text = chatBody(t, Slack, "", `{"a":"<@U1>"}`)
	assert.Equal(t, "```\n{\"a\":\"&lt;@U1&gt;\"}\n```", text, "the JSON fallback is escaped too")
	b, text := chatBody(t, Discord, "", hostile)
	assert.Equal(t, "<!channel> <@U123> & <b>x</b>", text, "Discord is not Slack: allowed_mentions stops pings there")
	assert.Contains(t, string(b), `"allowed_mentions":{"parse":[]}`)

	// A cut never leaves half an entity, which Slack would show as "&am".
	_, text = chatBody(t, Slack, "", `{"text":"x`+strings.Repeat("&", 5000)+`"}`)
	assert.True(t, strings.HasSuffix(text, "&amp;…"), text[len(text)-20:])
}

func TestChatTemplateWithNothingFound(t *testing.T) {
	for tpl, want := range map[string]string{
		`{who}:  ({what})`:       "checkout is failing",
		`Alert: {who}`:           "checkout is failing",
		`{empty}`:                "checkout is failing",
		`New result`:             "New result",
		`{summary} ({who})`:      "checkout is failing ()",
		`🔥`:                      "🔥",
		`-- {{}} --`:             "checkout is failing",
		`{{literal}} only {who}`: "checkout is failing",
	} {
		_, text := chatBody(t, Teams, tpl, `{"summary":"checkout is failing","empty":""}`)
		assert.Equal(t, want, text, tpl)
	}
}

// Per platform: 12,500 CJK characters (37.5 KB of UTF-8) are cut to the platform's
// limits, bytes of the whole body and characters of the text.
func TestChatCutByBytesPerPlatform(t *testing.T) {
	cjk := strings.Repeat("漢", 12500)
	for platform, want := range map[string]struct{ maxBytes, chars int }{
		Slack:   {16000, 4000},
		Discord: {8192, 2000},
		Teams:   {20000, 0},
	} {
		b, text := chatBody(t, platform, "", `{"text":"`+cjk+`"}`)
		assert.LessOrEqual(t, len(b), want.maxBytes, platform)
		assert.Less(t, len(b), 28*1024, "%s: under Teams' 28 KB, the smallest platform limit", platform)
		assert.True(t, strings.HasPrefix(text, "漢漢") && strings.HasSuffix(text, "…"), platform)
		if want.chars > 0 {
			assert.Equal(t, want.chars, utf8.RuneCountInString(text), "%s: cut at the character limit", platform)
		} else {
			assert.Greater(t, len(b), want.maxBytes-8, "%s: as much text as the bytes allow", platform)
		}

		// The JSON fallback is cut inside its code block, which stays closed.
		b, text = chatBody(t, platform, "", `{"rows":"`+cjk+`"}`)
		assert.LessOrEqual(t, len(b), want.maxBytes, platform)
		assert.True(t, strings.HasPrefix(text, "```\n{\"rows\":\"漢"), platform)
		assert.True(t, strings.HasSuffix(text, "漢…\n```"), platform)
		assert.Equal(t, 2, strings.Count(text, "```"), platform)
	}
}

func FuzzRender(f *testing.F) {
	for _, s := range []string{"{a.b}: {c}", "{{x}}", "{", "}", "{a.0.b}", "{ }", "x{y"} {
		f.Add(s, []byte(push))
	}
	f.Fuzz(func(t *testing.T, tpl string, payload []byte) {
		doc, err := Decode(payload)
		if err != nil {
			doc = nil
		}
		out, missing := Render(tpl, doc)
		if len(out) > len(tpl)+len(payload)*(len(Placeholders(tpl))+1)+16 {
			t.Fatalf("output %d bytes from a %d-byte template", len(out), len(tpl))
		}
		if len(missing) > len(Placeholders(tpl)) {
			t.Fatalf("more missing fields than placeholders")
		}
	})
}

func FuzzResolve(f *testing.F) {
	for _, s := range []string{"repo.name", "labels.0", "a..b", ".", "pr.head.sha.x"} {
		f.Add([]byte(push), s)
	}
	f.Fuzz(func(t *testing.T, payload []byte, path string) {
		doc, err := Decode(payload)
		if err != nil {
			return
		}
		v, ok := Resolve(doc, path)
		if !ok && v != nil {
			t.Fatalf("a missing path returned %v", v)
		}
		_ = String(v)
	})
}

// A result's author cannot pass a link off as another, nor reorder
// what is shown, on any platform.
func TestChatShowsWhereLinksGo(t *testing.T) {
	const masked = `{"text":"Build failed: [click](https://evil.example) to see why"}`
	for _, p := range []string{Discord, Teams} {
		_, text := chatBody(t, p, "", masked)
		assert.Equal(t, "Build failed: [click] (https://evil.example) to see why", text, "%s: no masked link, the address shows", p)
		_, text = chatBody(t, p, "{text}", masked)
		assert.Equal(t, "Build failed: [click] (https://evil.example) to see why", text, p)
		_, text = chatBody(t, p, "[details]({url})", `{"url":"https://evil.example"}`)
		assert.Equal(t, "[details] (https://evil.example)", text, "%s: the payload's address behind the template's text shows", p)
		_, text = chatBody(t, p, "[docs]{x}", `{"x":"(https://evil.example)"}`)
		assert.Equal(t, "[docs] (https://evil.example)", text, "%s: a link the template starts and the payload ends", p)
		_, text = chatBody(t, p, "[runbook](https://wiki.example/r) {text}", `{"text":"disk full"}`)
		assert.Equal(t, "[runbook](https://wiki.example/r) disk full", text, "%s: the template's own link is kept", p)
		// Discord reads both as links, CommonMark neither.
		_, text = chatBody(t, p, "", `{"text":"[a]]](https://evil.example) [b](https://e(vil.example)"}`)
		assert.NotContains(t, text, "](", p)
	}
	_, text := chatBody(t, Slack, "", masked)
	assert.Equal(t, "Build failed: [click](https://evil.example) to see why", text, "Slack shows Markdown literally")
	_, text = chatBody(t, Discord, "", `{"a":"[click](https://evil.example)"}`)
	assert.Equal(t, "```\n{\"a\":\"[click](https://evil.example)\"}\n```", text, "Discord renders no link in a code block")
	_, text = chatBody(t, Teams, "", `{"a":"[click](https://evil.example)"}`)
	assert.Equal(t, "```\n{\"a\":\"[click] (https://evil.example)\"}\n```", text, "a Teams card has no code blocks")

	for _, p := range []string{Slack, Discord, Teams} {
		_, text := chatBody(t, p, "", `{"text":"invoice\u202egpj.exe \u2066x\u2069 \u200fy"}`)
		assert.Equal(t, "invoicegpj.exe x y", text, "%s: bidirectional controls removed", p)
		_, text = chatBody(t, p, "\u202e{text}", `{"text":"ok"}`)
		assert.Equal(t, "ok", text, "%s: from the template too", p)
	}
}

// FuzzChatBody checks what every chat message must hold, from any template and result
// text: a valid JSON body within the platform's byte limit, substituted text with no
// Slack control sequence, and a JSON fallback whose code block is closed.
func FuzzChatBody(f *testing.F) {
	f.Add("{text}", "<!channel> <@U123> & <b>x</b>", uint16(1))
	f.Add("<!here> {text} ({nope})", "&amp;", uint16(3000))
	f.Add(":  ({nope})", "漢", uint16(12500))
	f.Add("{text}", "```", uint16(5000))
	f.Add("{{", "a\xffb\x00<", uint16(9000))
	f.Add("[x]({text})", "[click](https://evil.example)\u202e", uint16(2))
	f.Add("{text}", "[a]]](https://e(vil)", uint16(700))
	f.Fuzz(func(t *testing.T, tpl, value string, repeat uint16) {
		if len(value)*int(repeat) > 32<<10 {
			return
		}
		value = strings.Repeat(value, int(repeat))
		text, _ := json.Marshal(map[string]string{"text": value})
		other, _ := json.Marshal(map[string]string{"v": value})
		for platform, lim := range limits {
			for _, c := range []struct {
				tpl                string
				payload            []byte
				substituted, fence bool
			}{{tpl, text, false, false}, {"{text}", text, true, false}, {"", other, true, true}, {"[see]({text})", text, true, false}, {"<{text}|details>", text, false, false}} {
				doc, err := Decode(c.payload)
				if err != nil {
					t.Fatal(err)
				}
				b, err := ChatBody(platform, c.tpl, c.payload, doc)
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
				if c.substituted && platform == Slack && !slackSafe(got) {
					t.Fatalf("substituted text reaches Slack unescaped: %q", got)
				}
				if strings.IndexFunc(got, isBidiControl) >= 0 {
					t.Fatalf("%s text keeps a bidirectional control: %q", platform, got)
				}
				if c.substituted && (platform == Teams || platform == Discord && !c.fence) && maskedLink(got) {
					t.Fatalf("%s text may hold a masked link from the payload: %q", platform, got)
				}
				// (A value starting with !, @ or # makes the template's sequence a mention,
				// which the template opted in to.)
				if platform == Slack && c.tpl == "<{text}|details>" && strings.Contains(got, "|details>") && !strings.ContainsAny(value[:min(1, len(value))], "!@#") {
					t.Fatalf("slack link to the payload's address keeps its mask: %q", got)
				}
				if c.fence && (!strings.HasPrefix(got, "```\n") || !strings.HasSuffix(got, "\n```") || strings.Count(got, "```") != 2) {
					t.Fatalf("%s code block not closed: %q", platform, got)
				}
			}
		}
	})
}

// maskedLink reports whether text has a "](" that a "[" before it and a ")" after it
// could make a link.
func maskedLink(text string) bool {
	first := strings.IndexByte(text, '[')
	if first < 0 {
		return false
	}
	i := strings.Index(text[first:], "](")
	return i >= 0 && strings.Contains(text[first+i:], ")")
}

// slackSafe reports whether text has no < or > and an & only as an entity.
func slackSafe(text string) bool {
	if strings.ContainsAny(text, "<>") {
		return false
	}
	for i := strings.IndexByte(text, '&'); i >= 0; i = strings.IndexByte(text, '&') {
		text = text[i:]
		if !strings.HasPrefix(text, "&amp;") && !strings.HasPrefix(text, "&lt;") && !strings.HasPrefix(text, "&gt;") {
			return false
		}
		text = text[1:]
	}
	return true
}
