package incident

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// HeaderIncidentID names the incident of a notice on the output stream.
const HeaderIncidentID = "Svc-Incident-Id"

// Notice is a change in an incident's life told to the project's destinations.
type Notice struct {
	Type       string    `json:"type"`       // NoticeOpened, NoticeUpdated, NoticeResolved
	Transition string    `json:"transition"` // opened, reopened, call, acknowledged, muted, resolved, reinvestigate
	By         string    `json:"by,omitempty"`
	Incident   Summary   `json:"incident"`
	Text       string    `json:"text"` // one line a person reads in chat
	At         time.Time `json:"at"`
	// Seq is the incident's timeline length (kept and dropped) at the transition: the
	// same transition decided twice has the same Seq, and so the same MsgID.
	Seq int `json:"seq"`
}

type noticeBody struct {
	Type       string    `json:"type"`
	Transition string    `json:"transition"`
	By         string    `json:"by,omitempty"`
	Incident   Summary   `json:"incident"`
	Text       string    `json:"text"`
	ProjectID  string    `json:"project_id"`
	At         time.Time `json:"at"`
}

// Body is the notice's JSON as destinations get it.
func (n Notice) Body(project string) []byte {
	b, _ := json.Marshal(noticeBody{Type: n.Type, Transition: n.Transition, By: n.By, Incident: n.Incident,
		Text: n.Text, ProjectID: project, At: n.At})
	return b
}

// MsgID is the notice's request id and message id on the output stream: a repeat of the
// same transition (a retried publish, a redelivered batch) is stored once.
func (n Notice) MsgID() string {
	return streams.NoticeIDPrefix + "incident-" + n.Incident.ID + "-" + strconv.Itoa(n.Seq)
}

// Publish puts the notice on the project's output stream and wakes the sink role. The
// stream is created when missing (a project whose destinations were never read from),
// with limits (streams.DefaultLimits when none are given; pass the component's own).
func Publish(ctx context.Context, js jetstream.JetStream, nc *nats.Conn, project string, n Notice, limits ...streams.Limits) error {
	if !streams.ValidProjectID(project) {
		return fmt.Errorf("incident notice: invalid project id %q", project)
	}
	l := streams.DefaultLimits()
	if len(limits) > 0 {
		l = limits[0]
	}
	if err := streams.Create(ctx, js, streams.OutputConfig(project, l)); err != nil {
		return err
	}
	msg := streams.NoticeMsg(project, n.MsgID(), n.Body(project))
	msg.Header.Set(HeaderIncidentID, n.Incident.ID)
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("publish incident notice: %w", err)
	}
	// Idle destinations are not polled; a lost wake is caught by the sink's sweep.
	if nc != nil {
		_ = nc.Publish(streams.WakeSubject(streams.WakeOutput, project), nil)
	}
	return nil
}
