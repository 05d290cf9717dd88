package sinkexporter

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/pipelinedata"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/delivery"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// consumeResult hands the exporter one agent result bound for sinkID, as the JetStream
// receiver does in output mode.
func consumeResult(r *running, projectID, sinkID, payload string) error {
	ld, lrs := pipelinedata.New()
	pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(payload), Kind: pipelinedata.KindResult, Seq: 7,
		SinkID: sinkID, RequestID: "req_1", MsgID: "out:req_1:abc"})
	return r.exp.ConsumeLogs(principal.NewContext(context.Background(), principal.Principal{ProjectID: projectID}), ld)
}

func sinkProject(id string, sinks ...mirror.Sink) mirror.Project {
	p := project(id, "")
	for i := range sinks {
		sinks[i].Enabled = true
	}
	p.Sinks = sinks
	return p
}

func TestResultForARemovedDestinationIsSkipped(t *testing.T) {
	e := newEnv(t)
	hook := newAgent(t, nil)
	e.putProject(t, sinkProject("skip", mirror.Sink{ID: "s_live", Kind: "webhook", URL: hook.srv.URL}))
	r := e.start(t, nil)

	require.NoError(t, consumeResult(r, "skip", "s_gone", `{"text":"x"}`), "nothing owed to a removed destination")
	assert.Empty(t, hook.requests(), "and nothing sent elsewhere")
	assert.Empty(t, e.deadLetters(t, "skip"), "nor dead-lettered")
	assert.Equal(t, int64(1), r.sum(t, "otelcol_sink_deliveries", delivery.OutcomeSkipped))
}

// Sink URLs are user input like agent URLs: an internal address is refused when the
// connection is made, at once (no retries), and the result is dead-lettered saying why.
func TestSinkToAnInternalAddressIsRefusedAndDeadLettered(t *testing.T) {
	e := newEnv(t)
	hook := newAgent(t, nil)
	e.putProject(t, sinkProject("ssrf", mirror.Sink{ID: "s_int", Kind: "chat", Format: "slack", URL: hook.srv.URL}))
	r := e.start(t, func(c *Config) { c.AllowCIDRs = "" })

	require.NoError(t, consumeResult(r, "ssrf", "s_int", `{"text":"x"}`))
	assert.Empty(t, hook.requests(), "never connected")
	dl := e.deadLetters(t, "ssrf")
	require.Len(t, dl, 1)
	assert.Contains(t, dl[0].Header.Get(streams.HeaderDLQReason), "loopback")
	assert.Equal(t, "1", dl[0].Header.Get(streams.HeaderDLQAttempts))
	assert.Equal(t, "s_int", dl[0].Header.Get(streams.HeaderDLQSink))
	assert.Equal(t, "chat", dl[0].Header.Get(streams.HeaderDLQKind))
	assert.Equal(t, int64(1), r.sum(t, "otelcol_sink_deliveries", delivery.OutcomeDeadLettered))
}

func TestChatMessagesPerPlatform(t *testing.T) {
	e := newEnv(t)
	discord, teams, slack := newAgent(t, nil), newAgent(t, nil), newAgent(t, nil)
	e.putProject(t, sinkProject("chat",
		mirror.Sink{ID: "s_discord", Kind: "chat", Format: "discord", URL: discord.srv.URL, TextTemplate: "{who}: {text}"},
		mirror.Sink{ID: "s_teams", Kind: "chat", Format: "teams", URL: teams.srv.URL},
		mirror.Sink{ID: "s_slack", Kind: "chat", Format: "slack", URL: slack.srv.URL, TextTemplate: "<!here> {text}"}))
	r := e.start(t, nil)

	long := strings.Repeat("é", 2500)
	require.NoError(t, consumeResult(r, "chat", "s_discord", `{"who":"@everyone","text":"`+long+`"}`))
	require.NoError(t, consumeResult(r, "chat", "s_teams", `{"summary":"checkout is failing"}`))
	require.NoError(t, consumeResult(r, "chat", "s_slack", `{"text":"<!channel> <@U123> & <b>x</b>"}`))
	require.Eventually(t, func() bool {
		return len(discord.requests()) == 1 && len(teams.requests()) == 1 && len(slack.requests()) == 1
	}, 5*time.Second, 5*time.Millisecond)
	assert.JSONEq(t, `{"text":"<!here> &lt;!channel&gt; &lt;@U123&gt; &amp; &lt;b&gt;x&lt;/b&gt;"}`, string(slack.requests()[0].body),
		"the agent's text pings nobody; the template's own mention is kept")

	var d struct {
		Content         string `json:"content"`
		AllowedMentions struct {
			Parse []string `json:"parse"`
		} `json:"allowed_mentions"`
	}
	require.NoError(t, json.Unmarshal(discord.requests()[0].body, &d))
	assert.Equal(t, 2000, len([]rune(d.Content)), "cut to Discord's limit")
	assert.True(t, strings.HasPrefix(d.Content, "@everyone: éé") && strings.HasSuffix(d.Content, "…"))
	assert.NotNil(t, d.AllowedMentions.Parse, "an agent's text never pings the channel")
	assert.Empty(t, d.AllowedMentions.Parse)
	assert.Equal(t, "req_1", discord.requests()[0].header.Get("X-Request-Id"))
	assert.Empty(t, discord.requests()[0].header.Get("webhook-signature"), "chat platforms are not sent signatures")

	var card struct {
		Attachments []struct {
			ContentType string `json:"contentType"`
			Content     struct {
				Body []struct{ Text string } `json:"body"`
			} `json:"content"`
		} `json:"attachments"`
	}
	require.NoError(t, json.Unmarshal(teams.requests()[0].body, &card))
	require.Len(t, card.Attachments, 1)
	assert.Equal(t, "application/vnd.microsoft.card.adaptive", card.Attachments[0].ContentType)
	assert.Equal(t, "checkout is failing", card.Attachments[0].Content.Body[0].Text)
}

// Records for an agent handed to the sink exporter (a pipeline wired to the wrong
// exporter) are refused naming the agent exporter, and nothing is sent or dead-lettered:
// they stay on their stream.
func TestRecordsHandedToTheSinkExporterAreRefused(t *testing.T) {
	e := newEnv(t)
	hook := newAgent(t, nil)
	p := sinkProject("wrong", mirror.Sink{ID: "s_hook", Kind: "webhook", URL: hook.srv.URL})
	p.Pipeline.AgentEndpointURL = hook.srv.URL
	e.putProject(t, p)
	r := e.start(t, nil)

	ld, lrs := pipelinedata.New()
	pipelinedata.Append(lrs, pipelinedata.Item{Body: []byte(`{"n":1}`), Signal: "event", Seq: 1})
	err := r.exp.ConsumeLogs(principal.NewContext(context.Background(), principal.Principal{ProjectID: "wrong"}), ld)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "use the `agent` exporter in that pipeline")
	assert.Empty(t, hook.requests())
	assert.Empty(t, e.deadLetters(t, "wrong"))

	require.NoError(t, consumeResult(r, "wrong", "s_hook", `{"text":"x"}`), "results are delivered")
	assert.Len(t, hook.requests(), 1)
}
