package streams

import (
	"strings"

	"github.com/nats-io/nats.go"
)

// SignalNotice is the Svc-Signal of a notice the service itself puts on a project's
// output stream (usage thresholds, failed deliveries), next to the agent's results
// ("agent_output"). The sink role delivers it like a result but in the service's own
// words: never through a destination's text template, and a notice that cannot be
// delivered is never itself the subject of a notice (no loop).
const SignalNotice = "notice"

// Request ids of notices start with NoticeIDPrefix. The ingest receiver marks a result
// whose request id it never issued as unmatched, so an agent cannot pass its own result
// off as a notice by choosing such an id.
const NoticeIDPrefix = "notice-"

// IsNotice reports whether an output stream message with this signal, request id and
// unmatched mark is the service's notice. The signal decides; a replay, which knows only
// the delivery's request id, goes by the id of a matched result.
func IsNotice(signal, requestID string, unmatched bool) bool {
	return signal == SignalNotice || signal == "" && !unmatched && strings.HasPrefix(requestID, NoticeIDPrefix)
}

// NoticeMsg is notice id (NoticeIDPrefix and the rest) as a message of the project's
// output stream. The id is its request id and its msg id: a repeat within the stream's
// duplicate window (a sender that retries, or two that decided the same) is dropped.
func NoticeMsg(projectID, id string, body []byte) *nats.Msg {
	return &nats.Msg{Subject: OutputSubject(projectID), Data: body, Header: nats.Header{
		HeaderSignal:    []string{SignalNotice},
		HeaderRequestID: []string{id},
		HeaderMsgID:     []string{id},
	}}
}
