package slackapp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/incident"
	"github.com/otelcol-svc/otelcol-svc/internal/outbound"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

func loopbackClient() *http.Client {
	return outbound.NewClient(outbound.Options{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
}

func summary() incident.Summary {
	return incident.Summary{ID: "inc_0123456789abcdef0123456789abcdef_1", Fingerprint: "checkout/db", Title: "DB connections exhausted",
		Status: incident.StatusOpen, OpenedAt: time.Date(2026, 11, 27, 1, 2, 3, 0, time.UTC), Events: 12, Calls: 1}
}

type decodedBlocks struct {
	header  string
	fields  []string
	texts   []string
	actions map[string]string // action_id -> value
}

func decode(t *testing.T, raw json.RawMessage) decodedBlocks {
	t.Helper()
	var bs slack.Blocks
	require.NoError(t, json.Unmarshal(raw, &bs))
	d := decodedBlocks{actions: map[string]string{}}
	for _, b := range bs.BlockSet {
		switch b := b.(type) {
		case *slack.HeaderBlock:
			d.header = b.Text.Text
		case *slack.SectionBlock:
			for _, f := range b.Fields {
				d.fields = append(d.fields, f.Text)
			}
			if b.Text != nil {
				d.texts = append(d.texts, b.Text.Text)
			}
		case *slack.ActionBlock:
			for _, e := range b.Elements.ElementSet {
				btn := e.(*slack.ButtonBlockElement)
				d.actions[btn.ActionID] = btn.Value
			}
		}
	}
	return d
}

// A root is posted with the bot token as a bearer token, never in the form, and Slack
// gets the header, fields and the four buttons naming the incident.
func TestPostRoot(t *testing.T) {
	s := testenv.NewSlack(t)
	a := Send(context.Background(), loopbackClient(), s.URL(), s.Token, "otelcol-svc/test", Root("C1", "", summary()))
	require.True(t, a.OK(), "%+v", a)
	assert.Equal(t, "C1", a.Channel)

	calls := s.Calls()
	require.Len(t, calls, 1)
	assert.Equal(t, "chat.postMessage", calls[0].Method)
	assert.Equal(t, "Bearer "+s.Token, calls[0].Header.Get("Authorization"))
	assert.Equal(t, "otelcol-svc/test", calls[0].Header.Get("User-Agent"))
	assert.Empty(t, calls[0].Form.Get("token"), "the token is not in the body")
	assert.Equal(t, "Bearer "+s.Token, a.Sent.Get("Authorization"), "what was sent is reported, for a log to redact")

	roots := s.Roots()
	require.Len(t, roots, 1)
	assert.Equal(t, ":red_circle: DB connections exhausted", roots[0].Text)
	d := decode(t, roots[0].Blocks)
	assert.Equal(t, "DB connections exhausted", d.header)
	assert.Contains(t, d.fields, "*Status*\n:red_circle: open")
	assert.Contains(t, d.fields, "*Events*\n12")
	assert.Contains(t, d.fields, "*Fingerprint*\ncheckout/db")
	assert.Contains(t, d.fields, "*Opened*\n<!date^1795741323^{date_short_pretty} {time}|2026-11-27 01:02 UTC>")
	id := summary().ID
	assert.Equal(t, map[string]string{ActionAcknowledge: id, ActionResolve: id, ActionMute: id, ActionReinvestigate: id}, d.actions)
}

// A later state updates the root in place; a resolved incident has no buttons left.
func TestUpdateRoot(t *testing.T) {
	s := testenv.NewSlack(t)
	hc := loopbackClient()
	posted := Send(context.Background(), hc, s.URL(), s.Token, "", Root("C1", "", summary()))
	require.True(t, posted.OK())

	sum := summary()
	sum.Status, sum.AcknowledgedBy, sum.Events = incident.StatusResolved, "slack:alice", 40
	resolved := time.Date(2026, 11, 27, 2, 0, 0, 0, time.UTC)
	sum.ResolvedAt = &resolved
	sum.LastResult = "Restarted <!channel> pgbouncer"
	a := Send(context.Background(), hc, s.URL(), s.Token, "", Root("C1", posted.TS, sum))
	require.True(t, a.OK(), "%+v", a)
	assert.Equal(t, posted.TS, a.TS)

	require.Len(t, s.Roots(), 1, "no second root")
	require.Len(t, s.Updates(), 1)
	cur, ok := s.Current(posted.TS)
	require.True(t, ok)
	d := decode(t, cur.Blocks)
	assert.Contains(t, d.fields, "*Status*\n:white_check_mark: resolved")
	assert.Contains(t, d.fields, "*Acknowledged by*\nslack:alice")
	assert.Contains(t, d.fields, "*Events*\n40")
	assert.Equal(t, []string{"*Last result*\nRestarted &lt;!channel&gt; pgbouncer"}, d.texts, "the agent's text pings nobody")
	assert.Empty(t, d.actions, "no buttons once resolved")
}

// A reply goes into the root's thread.
func TestReplyInThread(t *testing.T) {
	s := testenv.NewSlack(t)
	hc := loopbackClient()
	root := Send(context.Background(), hc, s.URL(), s.Token, "", Root("C1", "", summary()))
	require.True(t, root.OK())
	a := Send(context.Background(), hc, s.URL(), s.Token, "", Message{Channel: "C1", ThreadTS: root.TS, Text: "the pool is full"})
	require.True(t, a.OK())
	replies := s.Replies(root.TS)
	require.Len(t, replies, 1)
	assert.Equal(t, "the pool is full", replies[0].Text)
	assert.Equal(t, "false", s.Calls()[1].Form.Get("unfurl_links"))
}

// How Slack's refusals, rate limit and a refused address are reported.
func TestAnswers(t *testing.T) {
	s := testenv.NewSlack(t)
	hc := loopbackClient()
	msg := Message{Channel: "C1", Text: "hi"}

	s.RateLimit(1, 3)
	a := Send(context.Background(), hc, s.URL(), s.Token, "", msg)
	assert.False(t, a.OK())
	assert.Equal(t, http.StatusTooManyRequests, a.Status)
	assert.Equal(t, "3", a.RetryAfter)

	s.Refuse("channel_not_found", "internal_error")
	a = Send(context.Background(), hc, s.URL(), s.Token, "", msg)
	assert.Equal(t, "channel_not_found", a.Error)
	assert.False(t, a.Retryable)
	a = Send(context.Background(), hc, s.URL(), s.Token, "", msg)
	assert.Equal(t, "internal_error", a.Error)
	assert.True(t, a.Retryable)

	a = Send(context.Background(), hc, s.URL(), "xoxb-wrong", "", msg)
	assert.Equal(t, "invalid_auth", a.Error)
	assert.False(t, a.Retryable)

	a = Send(context.Background(), outbound.NewClient(outbound.Options{}), s.URL(), s.Token, "", msg)
	require.Error(t, a.Err)
	assert.True(t, errors.Is(a.Err, outbound.ErrForbiddenAddress), "the outbound rules apply to the API's address: %v", a.Err)
	assert.Zero(t, a.Status)

	assert.Len(t, s.Messages(), 0)
}

func TestMessageJSON(t *testing.T) {
	m := Root("C1", "1.2", summary())
	var got map[string]any
	require.NoError(t, json.Unmarshal(m.JSON(), &got))
	assert.Equal(t, "chat.update", got["method"])
	assert.Equal(t, "1.2", got["ts"])
	assert.NotEmpty(t, got["blocks"])
}

// Titles, fingerprints and results come from events and agents: whatever they hold, the
// root is valid Block Kit within Slack's bounds, and its mrkdwn has no control sequence.
func FuzzRoot(f *testing.F) {
	f.Add("db down", "checkout", "restarted", "slack:bob")
	f.Add("<!channel> <https://evil|x>", "a&b<c>", strings.Repeat("é", 700), "<@U1>")
	f.Add("", "", "", "")
	f.Add("\u202e\n\t", "\x00", "line\nline", " ")
	f.Fuzz(func(t *testing.T, title, fp, result, by string) {
		s := summary()
		s.Title, s.Fingerprint, s.LastResult, s.AcknowledgedBy = title, fp, result, by
		m := Root("C1", "", s)
		var bs slack.Blocks
		require.NoError(t, json.Unmarshal(m.JSON(), &struct {
			Blocks *slack.Blocks `json:"blocks"`
		}{&bs}))
		d := decode(t, mustJSON(t, bs))
		require.NotEmpty(t, d.header)
		assert.LessOrEqual(t, utf8.RuneCountInString(d.header), 150)
		assert.Len(t, d.actions, 4)
		for _, txt := range append(append(d.fields, d.texts...), m.Text) {
			assert.LessOrEqual(t, utf8.RuneCountInString(txt), 2000)
			// The only control sequences are the service's dates.
			rest := txt
			for {
				i := strings.Index(rest, "<!date^")
				if i < 0 {
					break
				}
				end := strings.IndexByte(rest[i:], '>')
				require.GreaterOrEqual(t, end, 0)
				rest = rest[:i] + rest[i+end+1:]
			}
			assert.NotContains(t, rest, "<", txt)
			assert.NotContains(t, rest, ">", txt)
		}
	})
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}
