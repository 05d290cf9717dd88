package textfmt

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strings"
	"unicode/utf8"
)

// Chat platforms of a chat sink.
const (
	Slack   = "slack"
	Discord = "discord"
	Teams   = "teams"
)

// Message length limits, kept below each platform's hard limit so a message is never
// refused for its size: Discord refuses content over 2000 characters; Slack truncates
// text past 40,000 and recommends 4,000; Teams cards are bounded at about 28 KB.
var limits = map[string]int{Slack: 4000, Discord: 2000, Teams: 20000}

// Platform resolves a chat sink's format; "auto" goes by the webhook URL's host. Hosts
// it cannot tell get Slack's shape, which most incoming webhooks accept.
func Platform(format, webhookURL string) string {
	if format != "" && format != "auto" {
		return format
	}
	u, err := url.Parse(webhookURL)
	if err != nil {
		return Slack
	}
	host := strings.ToLower(u.Hostname())
	switch {
	case host == "discord.com" || host == "discordapp.com" || strings.HasSuffix(host, ".discord.com"):
		return Discord
	case strings.HasSuffix(host, ".webhook.office.com") || strings.HasSuffix(host, ".logic.azure.com") ||
		strings.HasSuffix(host, ".powerplatform.com") || strings.HasSuffix(host, ".powerautomate.com"):
		return Teams
	}
	return Slack
}

// DefaultText is the text of a result when the sink has no template: its text, summary
// or message field, else the payload (as sent, keys in their order) as compact JSON in a
// code block.
func DefaultText(payload []byte, doc any) string {
	if m, ok := doc.(map[string]any); ok {
		for _, k := range []string{"text", "summary", "message"} {
			if s, ok := m[k].(string); ok && s != "" {
				return s
			}
		}
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, payload); err != nil {
		return "```\n" + String(doc) + "\n```"
	}
	return "```\n" + compact.String() + "\n```"
}

// Truncate shortens s to at most n characters, marking the cut with an ellipsis and never
// splitting a character.
func Truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	runes := []rune(s)
	return string(runes[:n-1]) + "…"
}

// ChatBody is the JSON body a platform's incoming webhook accepts for text.
func ChatBody(platform, text string) ([]byte, error) {
	limit, ok := limits[platform]
	if !ok {
		limit = limits[Slack]
	}
	text = Truncate(text, limit)
	switch platform {
	case Discord:
		return json.Marshal(map[string]any{"content": text, "allowed_mentions": map[string]any{"parse": []string{}}})
	case Teams:
		// A Workflows ("Post to a channel when a webhook request is received") message
		// with one Adaptive Card holding the text.
		return json.Marshal(map[string]any{
			"type": "message",
			"attachments": []any{map[string]any{
				"contentType": "application/vnd.microsoft.card.adaptive",
				"content": map[string]any{
					"$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
					"type":    "AdaptiveCard",
					"version": "1.4",
					"body":    []any{map[string]any{"type": "TextBlock", "text": text, "wrap": true}},
				},
			}},
		})
	default:
		return json.Marshal(map[string]any{"text": text})
	}
}
