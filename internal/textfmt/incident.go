package textfmt

import (
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxTitle is how many characters of an incident's title a chat line shows.
const MaxTitle = 150

// OneLine is text from outside (an incident's title, taken from an event) as one line of
// a chat message: control characters and runs of white space become one space, bidi
// controls are removed, and it is cut to n characters, the cut marked with "…".
func OneLine(s string, n int) string {
	s = strings.Join(strings.FieldsFunc(stripBidi(strings.ToValidUTF8(s, "")), func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r)
	}), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimRight(string(r[:max(n-1, 0)]), " ") + "…"
}

// SlackEscape makes text from outside render literally in Slack's mrkdwn: it mentions
// nobody and links nowhere ("<!channel>", "<https://x|y>"), bidi controls removed.
func SlackEscape(s string) string { return slackEscape(stripBidi(s)) }

// titlePrefix is "[title] " in the platform's text. The title links nowhere on any
// platform: escaped for Slack, and its own brackets made parentheses for Markdown, which
// then has no "[...](...)" to read as a link.
func titlePrefix(platform, title string) string {
	title = OneLine(title, MaxTitle)
	if title == "" {
		return ""
	}
	if platform == Slack {
		title = slackEscape(title)
	} else {
		title = strings.NewReplacer("[", "(", "]", ")").Replace(title)
	}
	return "[" + title + "] "
}

// SlackText is the text a Slack message of a result carries (ChatBodyTitled's for
// Slack), for a Slack app posting through the Web API rather than an incoming webhook.
func SlackText(title, tpl string, payload []byte, doc any, label, link string) (string, error) {
	body, err := ChatBodyTitled(Slack, title, tpl, payload, doc, label, link)
	if err != nil {
		return "", err
	}
	var m struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return "", err
	}
	return m.Text, nil
}
