package slackapp

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/otelcol-svc/otelcol-svc/internal/incident"
	"github.com/otelcol-svc/otelcol-svc/internal/textfmt"
)

// The root message's buttons: Slack posts the action_id and value (the incident id) of
// the one pressed to the receiver's interactions endpoint.
const (
	ActionAcknowledge   = "incident_acknowledge"
	ActionResolve       = "incident_resolve"
	ActionMute          = "incident_mute"
	ActionReinvestigate = "incident_reinvestigate"
	// ActionsBlockID names the block holding them.
	ActionsBlockID = "incident_actions"
)

// Bounds of Block Kit (https://api.slack.com/reference/block-kit/blocks): a header's
// text is at most 150 characters, a section field's 2,000; the last result is the
// incident's own 500.
const (
	maxHeader      = 150
	maxField       = 300
	maxLastResult  = 500
	maxFingerprint = 200
)

// statusEmoji marks the status in the notification text and the Status field.
func statusEmoji(status string) string {
	switch status {
	case incident.StatusResolved:
		return ":white_check_mark:"
	case incident.StatusAcknowledged:
		return ":large_orange_circle:"
	}
	return ":red_circle:"
}

// Root is the incident's root message in channel: its title as the header, its state as
// fields, and its four buttons while it is not resolved. ts "" posts it; else it updates
// the root posted as ts. Everything from events (title, fingerprint, the agent's last
// result, who acted) is shown literally: it pings nobody and links nowhere.
func Root(channel, ts string, s incident.Summary) Message {
	title := textfmt.OneLine(s.Title, maxHeader)
	if title == "" {
		title = "Incident " + s.ID
	}
	status := s.Status
	if status == "" {
		status = incident.StatusOpen
	}
	fields := []*slack.TextBlockObject{
		field("Status", statusEmoji(status)+" "+textfmt.SlackEscape(status)),
		field("Events", strconv.FormatInt(s.Events, 10)),
		field("Opened", slackDate(s.OpenedAt)),
		field("Fingerprint", textfmt.SlackEscape(orNone(textfmt.OneLine(s.Fingerprint, maxFingerprint)))),
		field("Agent calls", strconv.Itoa(s.Calls)),
	}
	if s.AcknowledgedBy != "" {
		fields = append(fields, field("Acknowledged by", textfmt.SlackEscape(textfmt.OneLine(s.AcknowledgedBy, maxField))))
	}
	if s.MutedUntil != nil && status != incident.StatusResolved {
		fields = append(fields, field("Muted until", slackDate(*s.MutedUntil)))
	}
	if s.ResolvedAt != nil {
		fields = append(fields, field("Resolved", slackDate(*s.ResolvedAt)))
	}
	blocks := []slack.Block{
		slack.NewHeaderBlock(slack.NewTextBlockObject(slack.PlainTextType, title, true, false)),
		slack.NewSectionBlock(nil, fields, nil),
	}
	if r := strings.TrimSpace(s.LastResult); r != "" {
		blocks = append(blocks, slack.NewSectionBlock(
			slack.NewTextBlockObject(slack.MarkdownType, "*Last result*\n"+textfmt.SlackEscape(cutRunes(r, maxLastResult)), false, false), nil, nil))
	}
	if status != incident.StatusResolved {
		blocks = append(blocks, slack.NewActionBlock(ActionsBlockID,
			button(ActionAcknowledge, "Acknowledge", s.ID, ""),
			button(ActionResolve, "Resolve", s.ID, slack.StylePrimary),
			button(ActionMute, "Mute 1 h", s.ID, ""),
			button(ActionReinvestigate, "Investigate again", s.ID, ""),
		))
	}
	return Message{Channel: channel, TS: ts, Text: statusEmoji(status) + " " + textfmt.SlackEscape(title), Blocks: blocks}
}

func field(name, value string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, "*"+name+"*\n"+value, false, false)
}

func button(actionID, text, id string, style slack.Style) *slack.ButtonBlockElement {
	b := slack.NewButtonBlockElement(actionID, id, slack.NewTextBlockObject(slack.PlainTextType, text, false, false))
	if style != "" {
		b.WithStyle(style)
	}
	return b
}

// slackDate shows t in each reader's time zone, with UTC for clients that cannot
// (https://api.slack.com/reference/surfaces/formatting#date-formatting).
func slackDate(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return fmt.Sprintf("<!date^%d^{date_short_pretty} {time}|%s>", t.Unix(), t.UTC().Format("2006-01-02 15:04 UTC"))
}

func orNone(s string) string {
	if s == "" {
		return "(none: one incident per project)"
	}
	return s
}

func cutRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
