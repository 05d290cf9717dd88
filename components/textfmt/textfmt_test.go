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

	raw := []byte(`{"summary":"checkout is failing","n":1}`)
	doc, _ := Decode(raw)
	assert.Equal(t, "checkout is failing", DefaultText(raw, doc))
	raw = []byte(`{"z": 1.50, "a": [1, 2]}`)
	doc, _ = Decode(raw)
	assert.Equal(t, "```\n{\"z\":1.50,\"a\":[1,2]}\n```", DefaultText(raw, doc), "compact, numbers and key order as sent")

	long := strings.Repeat("é", 5000)
	var discord struct {
		Content string `json:"content"`
	}
	b, err := ChatBody(Discord, long)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &discord))
	assert.Equal(t, 2000, utf8.RuneCountInString(discord.Content), "within Discord's limit")
	assert.True(t, strings.HasSuffix(discord.Content, "…"))
	assert.Contains(t, string(b), `"allowed_mentions":{"parse":[]}`, "agent text cannot ping @everyone")

	b, err = ChatBody(Slack, "hi")
	require.NoError(t, err)
	assert.JSONEq(t, `{"text":"hi"}`, string(b))
	b, err = ChatBody(Teams, "hi")
	require.NoError(t, err)
	assert.Contains(t, string(b), `"type":"AdaptiveCard"`)
	assert.Contains(t, string(b), `"text":"hi"`)
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

func FuzzChatBody(f *testing.F) {
	f.Add("slack", "hello")
	f.Add("discord", strings.Repeat("x", 3000))
	f.Add("teams", "a\xffb")
	f.Fuzz(func(t *testing.T, platform, text string) {
		b, err := ChatBody(platform, text)
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(b) {
			t.Fatalf("invalid JSON body %q", b)
		}
	})
}
