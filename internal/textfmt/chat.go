package textfmt

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Chat platforms of a chat sink.
const (
	Slack   = "slack"
	Discord = "discord"
	Teams   = "teams"
)

// limit bounds one platform's message: chars the text's characters (0: no such limit),
// bytes the whole encoded JSON body, since a platform refuses a body over its size
// whatever its character count (12,500 CJK characters are a 60 KB body).
type limit struct{ chars, bytes int }

// Each kept below the platform's documented limit, so a message is never refused for its
// size:
//   - Slack truncates text past 40,000 characters and asks for at most 4,000
//     (https://api.slack.com/reference/messaging/payload, "text"); 4,000 characters of
//     up to 4 bytes fit 16,000 bytes.
//   - Discord refuses content over 2,000 characters
//     (https://discord.com/developers/docs/resources/webhook#execute-webhook).
//   - Teams documents a 28 KB message limit (https://learn.microsoft.com/en-us/microsoftteams/platform/webhooks-and-connectors/how-to/add-incoming-webhook,
//     "The message size limit is 28 KB"), but senders report 413s from about 21 KB
//     (https://github.com/atc0005/go-teams-notify/issues/59), the card being wrapped
//     on its way: 20,000 bytes.
var limits = map[string]limit{
	Slack:   {chars: 4000, bytes: 16000},
	Discord: {chars: 2000, bytes: 8192},
	Teams:   {bytes: 20000},
}

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

// slackEscape makes text render literally in Slack: "<!channel>", "<@U123>" and "<b>"
// are control sequences (mentions, links) unless their &, < and > are written as
// entities (https://api.slack.com/reference/surfaces/formatting#escaping).
var slackEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace

// message is a chat text before it is cut to the platform's limit.
type message struct {
	text   string
	fenced bool // text is the inside of a code block, whose closing fence a cut keeps
	// spans are the byte ranges of text that came from the payload (all of it for a
	// default text), which a result's author chose.
	spans [][2]int
	// suffix is the service's own line after the text (a link to the delivery), which a
	// cut never takes away; prefix the same before it (an incident's title).
	suffix string
	prefix string
}

// ChatBody renders a result (payload, and doc decoded from it by Decode) as the JSON body
// the platform's incoming webhook accepts, cut to the platform's limits.
//
// The text is tpl over the payload's fields, else the payload's text, summary or message
// field, else the payload as compact JSON in a code block. A template whose placeholders
// all name missing fields, or that renders nothing but punctuation and spaces, gets that
// default text instead. For Slack, text from the payload is escaped so it renders
// literally and pings nobody, while the template's own text is sent as written: a
// template opts in to mentions by writing them, e.g. "<!here> {summary}". On every
// platform a link whose text or address comes from the payload is shown with its
// address, and bidirectional control characters are removed (links.go).
func ChatBody(platform, tpl string, payload []byte, doc any) ([]byte, error) {
	return ChatBodyWithLink(platform, tpl, payload, doc, "", "")
}

// ChatBodyWithLink is ChatBody with a last line linking to link under label (the
// delivery in the dashboard), in the platform's link syntax. The line is the service's,
// not the payload's: it is kept whole when the text is cut. An empty link adds nothing.
func ChatBodyWithLink(platform, tpl string, payload []byte, doc any, label, link string) ([]byte, error) {
	return ChatBodyTitled(platform, "", tpl, payload, doc, label, link)
}

// ChatBodyTitled is ChatBodyWithLink with "[title] " before the text (an incident's
// title), kept whole when the text is cut; "" adds nothing.
func ChatBodyTitled(platform, title, tpl string, payload []byte, doc any, label, link string) ([]byte, error) {
	lim, ok := limits[platform]
	if !ok {
		platform, lim = Slack, limits[Slack]
	}
	esc := stripBidi
	if platform == Slack {
		esc = func(s string) string { return slackEscape(stripBidi(s)) }
	}
	m := defaultMessage(payload, doc, esc)
	if tpl = stripBidi(tpl); tpl != "" {
		text, found, _, spans := render(tpl, doc, esc)
		if (found > 0 || len(Placeholders(tpl)) == 0) && hasContent(text) {
			m = message{text: text, spans: spans}
		}
	}
	m = clip(m, lim.bytes+16)
	m.text = showLinks(platform, m)
	m.suffix = linkLine(platform, label, link)
	m.prefix = titlePrefix(platform, title)
	return fit(platform, m, lim)
}

// linkLine is "\n" and a link in the platform's syntax: Slack's <url|label>, Markdown's
// [label](url) for Discord and Teams.
func linkLine(platform, label, link string) string {
	if link == "" {
		return ""
	}
	label = stripBidi(label)
	if platform == Slack {
		return "\n<" + slackEscape(link) + "|" + slackEscape(label) + ">"
	}
	return "\n[" + label + "](" + link + ")"
}

// defaultMessage is a result's text when the sink has no template: its text, summary or
// message field, else the payload (as sent, keys in their order) as compact JSON in a
// code block.
func defaultMessage(payload []byte, doc any, esc func(string) string) message {
	if m, ok := doc.(map[string]any); ok {
		for _, k := range []string{"text", "summary", "message"} {
			if s, ok := m[k].(string); ok && hasContent(s) {
				s = esc(s)
				return message{text: s, spans: [][2]int{{0, len(s)}}}
			}
		}
	}
	var compact bytes.Buffer
	code := String(doc)
	if err := json.Compact(&compact, payload); err == nil {
		code = compact.String()
	}
	// A backtick can only be inside a JSON string, where \u0060 means the same: so no
	// value can close the code block early.
	code = esc(strings.ReplaceAll(code, "`", `\u0060`))
	return message{text: code, fenced: true, spans: [][2]int{{0, len(code)}}}
}

// clip drops what lies past n bytes of m's text (at a character boundary), which no
// message has room for: the links of what is sent are then found in time bounded by the
// platform's limit, whatever the result's size. What is left is still longer than the
// limit, so fit cuts it and marks the cut as before.
func clip(m message, n int) message {
	if len(m.text) <= n {
		return m
	}
	for n > 0 && !utf8.RuneStart(m.text[n]) {
		n--
	}
	m.text = m.text[:n]
	spans := m.spans[:0:0]
	for _, s := range m.spans {
		if s[0] < n {
			spans = append(spans, [2]int{s[0], min(s[1], n)})
		}
	}
	m.spans = spans
	return m
}

// hasContent reports whether text says anything: a letter, a digit or a symbol such as
// an emoji, not only punctuation and spaces (": ()" from a template with nothing found).
func hasContent(text string) bool {
	return strings.IndexFunc(text, func(r rune) bool {
		return unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.So, r)
	}) >= 0
}

// fit encodes m whole when it is within the limits, else its longest prefix that is,
// marked with an ellipsis and inside its code block when it has one. Cutting is by
// encoded bytes, so it searches the prefix length: JSON escapes and UTF-8 make bytes per
// character vary.
func fit(platform string, m message, lim limit) ([]byte, error) {
	// Every character takes at least a byte, so no prefix longer than the byte limit fits:
	// only those characters are needed, whatever the size of the result.
	head := m.text
	for i := range head {
		if i > lim.bytes {
			head = head[:i]
			break
		}
	}
	runes := []rune(head)
	if len(head) < len(m.text) {
		runes = append(runes, utf8.RuneError) // stands for the rest, never in a cut
	}
	text := func(n int) string {
		s := m.text
		if n < len(runes) {
			s = string(runes[:n])
			if platform == Slack {
				s = cutSlackSequence(s)
			}
			s += "…"
		}
		if m.fenced {
			s = "```\n" + s + "\n```"
		}
		return m.prefix + s + m.suffix
	}
	within := func(n int) ([]byte, bool, error) {
		s := text(n)
		if lim.chars > 0 && utf8.RuneCountInString(s) > lim.chars {
			return nil, false, nil
		}
		b, err := encode(platform, s)
		return b, err == nil && len(b) <= lim.bytes, err
	}
	if b, ok, err := within(len(runes)); ok || err != nil {
		return b, err
	}
	lo, hi := 0, len(runes)-1 // the longest prefix within the limits is in [lo, hi]
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if _, ok, _ := within(mid); ok {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	b, _, err := within(lo)
	return b, err
}

// cutSlackSequence drops an entity or <...> sequence the cut went through, which Slack
// would otherwise show half-written or read as a bare "&" or "<".
func cutSlackSequence(s string) string {
	if i := strings.LastIndexByte(s, '&'); i >= 0 && !strings.Contains(s[i:], ";") {
		s = s[:i]
	}
	if i := strings.LastIndexByte(s, '<'); i >= 0 && !strings.Contains(s[i:], ">") {
		s = s[:i]
	}
	return s
}

// encode is the body of one platform's incoming webhook for text. HTML escaping is off:
// it would write each < as 6 bytes, and no platform reads the body as HTML.
func encode(platform, text string) ([]byte, error) {
	var body any
	switch platform {
	case Discord:
		// No parse types: the text pings nobody (@everyone, roles and users render
		// literally).
		body = map[string]any{"content": text, "allowed_mentions": map[string]any{"parse": []string{}}}
	case Teams:
		// A Workflows ("Post to a channel when a webhook request is received") message
		// with one Adaptive Card holding the text.
		body = map[string]any{
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
		}
	default:
		body = map[string]any{"text": text}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(body); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
