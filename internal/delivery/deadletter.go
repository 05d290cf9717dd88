package delivery

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/nats-io/nats.go"

	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// deadLetterTimeout bounds creating the stream and waiting for the publish's ack.
const deadLetterTimeout = 5 * time.Second

// DeadLetterHeaders say why a delivery to target was dead-lettered.
func DeadLetterHeaders(requestID string, res Result, target string) nats.Header {
	h := nats.Header{}
	h.Set(streams.HeaderRequestID, requestID)
	h.Set(streams.HeaderDLQReason, headerValue(res.Reason))
	h.Set(streams.HeaderDLQStatus, strconv.Itoa(res.Status))
	h.Set(streams.HeaderDLQAttempts, strconv.Itoa(res.Attempts))
	h.Set(streams.HeaderDLQTarget, headerValue(redactURL(target)))
	return h
}

// PublishDeadLetter stores body, which could not be delivered, with why (h), in the
// project's dead-letter stream under kind (the subject's last token: "agent", "sink"),
// and returns once JetStream has acknowledged it, with the message's stream sequence
// (the delivery log points there, for a replay).
func (e *Engine) PublishDeadLetter(ctx context.Context, projectID, kind string, body []byte, h nats.Header) (uint64, error) {
	if e.nc == nil || !e.nc.IsConnected() {
		// Fail at once rather than wait out the timeout: the messages are redelivered
		// anyway, and the consumer is free again sooner.
		return 0, errors.New("NATS is unreachable")
	}
	ctx, cancel := context.WithTimeout(ctx, deadLetterTimeout)
	defer cancel()
	if err := e.ensureDeadLetterStream(ctx, projectID); err != nil {
		return 0, err
	}
	ack, err := e.js.PublishMsg(ctx, &nats.Msg{Subject: streams.DeadLetterSubject(projectID, kind), Data: body, Header: h})
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

func (e *Engine) ensureDeadLetterStream(ctx context.Context, projectID string) error {
	if _, ok := e.ensured.Load(projectID); ok {
		return nil
	}
	if err := streams.Ensure(ctx, e.js, streams.DeadLetterConfig(projectID, e.cfg.DeadLetterStream)); err != nil {
		return err
	}
	e.ensured.Store(projectID, struct{}{})
	return nil
}

// redactURL drops what may hold secrets: credentials, query and fragment.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(not a valid URL)"
	}
	u.User = nil
	u.RawQuery, u.ForceQuery = "", false
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

// Origin is scheme and host only, for logs: some services put a token in the path.
func Origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(not a valid URL)"
	}
	return u.Scheme + "://" + u.Host
}

// maxHeaderValue keeps a dead-letter header well within NATS's header limits.
const maxHeaderValue = 1024

// headerValue makes text safe as a header value: one line, printable, bounded.
func headerValue(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	if len(s) > maxHeaderValue {
		s = strings.ToValidUTF8(s[:maxHeaderValue], "")
	}
	return s
}
