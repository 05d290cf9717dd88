package agentexporter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/components/outbound"
	"github.com/otelcol-svc/otelcol-svc/components/webhooksig"
)

// result is how a call ended.
type result struct {
	delivered bool
	// aborted: ctx ended (collector shutdown); the call is neither delivered nor final.
	aborted  bool
	status   int // the last HTTP status, 0 when there was none
	attempts int
	reason   string // why it was not delivered, a sentence for the dead-letter headers
}

type class int

const (
	classOK class = iota
	classRetryable
	classFinal
	classAborted
)

// attemptResult is how one attempt ended.
type attemptResult struct {
	class  class
	status int
	// retryAfter is the agent's Retry-After, when it sent a usable one.
	retryAfter    time.Duration
	hasRetryAfter bool
	// reason: for a final attempt, the whole sentence; for a retryable one, what went
	// wrong ("503", "timeout after 10s"), used in the budget-exhausted sentence.
	reason string
}

// outgoing is one HTTP request the exporter must deliver: a call to an agent, or a
// result to a sink destination.
type outgoing struct {
	// who is "agent", "webhook" or "chat": it names the other side in reasons and logs,
	// and labels the telemetry.
	who string
	// urlField names the setting the URL comes from, for a sentence about a bad URL.
	urlField  string
	project   string
	method    string
	target    string
	headers   map[string]string // configured by the user (webhook sinks)
	body      []byte
	requestID string
	// signID is the webhook-id of the signature, the same on every attempt; empty means
	// the request id.
	signID string
	// secret signs the request; empty sends it unsigned.
	secret string
}

// deliver makes the request's attempts until one succeeds, one fails finally, the retry
// budget is spent, or ctx ends.
func (e *agentExporter) deliver(ctx context.Context, o outgoing) result {
	if err := outbound.CheckURL(o.target); err != nil {
		return result{reason: o.urlField + " is not valid: " + err.Error()}
	}
	budget := e.cfg.Retry.MaxElapsedTime
	deadline := time.Now().Add(budget)
	for n := 1; ; n++ {
		a := e.attempt(ctx, o)
		switch a.class {
		case classOK:
			e.tel.attempt(ctx, o.who, attemptOK)
			return result{delivered: true, status: a.status, attempts: n}
		case classAborted:
			return result{aborted: true, status: a.status, attempts: n}
		case classFinal:
			e.tel.attempt(ctx, o.who, attemptFinal)
			return result{status: a.status, attempts: n, reason: a.reason}
		}
		e.tel.attempt(ctx, o.who, attemptRetryable)
		wait, fromAgent := e.wait(n, a)
		remaining := time.Until(deadline)
		if remaining <= 0 || (fromAgent && wait > remaining) {
			return result{status: a.status, attempts: n, reason: exhausted(budget, n, a, fromAgent, wait, remaining)}
		}
		wait = min(wait, remaining)
		e.logger.Debug(o.who+" delivery attempt failed; retrying",
			zap.String("project", o.project), zap.String("request_id", o.requestID),
			zap.Int("attempt", n), zap.String("last", a.reason), zap.Duration("in", wait))
		if !sleep(ctx, wait) {
			return result{aborted: true, status: a.status, attempts: n}
		}
	}
}

// wait is the pause before attempt n+1: the agent's Retry-After when it sent one,
// else exponential backoff with full jitter.
func (e *agentExporter) wait(n int, a attemptResult) (time.Duration, bool) {
	if a.hasRetryAfter && a.retryAfter > 0 {
		return a.retryAfter, true
	}
	return fullJitter(e.cfg.Retry.InitialInterval, e.cfg.Retry.MaxInterval, n), false
}

// fullJitter picks a wait uniformly in [0, min(max, initial * 2^(n-1))]: spreading the
// retries of many calls over the whole interval keeps them from hitting a recovering
// agent all at once.
func fullJitter(initial, maxInterval time.Duration, n int) time.Duration {
	ceiling := initial
	for i := 1; i < n && ceiling < maxInterval; i++ {
		ceiling *= 2
	}
	ceiling = min(ceiling, maxInterval)
	return time.Duration(rand.Int64N(int64(ceiling) + 1))
}

func exhausted(budget time.Duration, n int, a attemptResult, fromAgent bool, wait, remaining time.Duration) string {
	s := fmt.Sprintf("retry budget of %s exhausted after %d %s; last: %s", budget, n, plural(n, "attempt"), a.reason)
	if fromAgent && wait > remaining && remaining > 0 {
		s += fmt.Sprintf(" (the agent asked to retry after %s, beyond the remaining %s)", wait, remaining.Round(time.Millisecond))
	}
	return s
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// attempt makes one request, bounded by the configured timeout.
func (e *agentExporter) attempt(ctx context.Context, o outgoing) attemptResult {
	actx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	method := o.method
	if method == "" {
		method = http.MethodPost
	}
	req, err := http.NewRequestWithContext(actx, method, o.target, bytes.NewReader(o.body))
	if err != nil {
		return attemptResult{class: classFinal, reason: o.urlField + " is not valid: the request could not be built"}
	}
	if err := e.setHeaders(req.Header, o); err != nil {
		return attemptResult{class: classFinal, reason: "the project's signing secret cannot sign: " + err.Error()}
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return e.classifyError(ctx, err)
	}
	defer resp.Body.Close()
	// An answer the other side started to send counts by its status, even if its body is
	// cut short: a 2xx means it took the request.
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, e.cfg.MaxResponseBytes))
	return classifyStatus(o.who, resp.StatusCode, resp.Header.Get("Retry-After"), answer, time.Now())
}

func (e *agentExporter) setHeaders(h http.Header, o outgoing) error {
	// The user's headers first, so ours win (the control plane refuses reserved names,
	// but a mirror entry written otherwise must not override the signature).
	for k, v := range o.headers {
		h.Set(k, v)
	}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", e.userAgent)
	h.Set("X-Request-Id", o.requestID)
	if o.secret == "" {
		return nil
	}
	id := o.signID
	if id == "" {
		id = o.requestID
	}
	// A fresh timestamp per attempt: a retry long after the first attempt must not fall
	// outside the receiver's replay window.
	return webhooksig.SetHeaders(h, o.secret, id, time.Now(), o.body)
}

func (e *agentExporter) classifyError(ctx context.Context, err error) attemptResult {
	if ctx.Err() != nil {
		return attemptResult{class: classAborted}
	}
	var forbidden *outbound.ForbiddenAddressError
	switch {
	case errors.As(err, &forbidden):
		return attemptResult{class: classFinal, reason: forbidden.Error()}
	case errors.Is(err, outbound.ErrForbiddenAddress):
		return attemptResult{class: classFinal, reason: "destination refused: " + describe(err)}
	case isTimeout(err):
		return attemptResult{class: classRetryable, reason: "timeout after " + e.cfg.Timeout.String()}
	}
	return attemptResult{class: classRetryable, reason: "connection error: " + describe(err)}
}

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// describe drops the *url.Error wrapper, whose text repeats the URL with its query.
func describe(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

func classifyStatus(who string, status int, retryAfter string, answer []byte, now time.Time) attemptResult {
	switch {
	case status >= 200 && status < 300:
		return attemptResult{class: classOK, status: status}
	case status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500:
		d, ok := parseRetryAfter(retryAfter, now)
		return attemptResult{class: classRetryable, status: status, retryAfter: d, hasRetryAfter: ok, reason: strconv.Itoa(status)}
	case status >= 300 && status < 400:
		return attemptResult{class: classFinal, status: status,
			reason: fmt.Sprintf("%s answered %d: redirects are not followed; configure the final address", who, status)}
	}
	return attemptResult{class: classFinal, status: status, reason: answered(who, status, answer)}
}

// maxAnswerInReason is how much of a refusing agent's answer the dead letter keeps.
const maxAnswerInReason = 200

func answered(who string, status int, answer []byte) string {
	snippet := strings.TrimSpace(string(answer[:min(len(answer), maxAnswerInReason)]))
	// A cut in the middle of a character leaves an invalid tail.
	snippet = strings.ToValidUTF8(snippet, "")
	if snippet == "" {
		return fmt.Sprintf("%s answered %d with an empty body", who, status)
	}
	return fmt.Sprintf("%s answered %d: %s", who, status, snippet)
}

// maxRetryAfter keeps a huge delay-seconds from overflowing a Duration; anything this long
// is beyond every budget anyway.
const maxRetryAfter = 365 * 24 * time.Hour

// parseRetryAfter reads delay-seconds or an HTTP date (RFC 9110 section 10.2.3).
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if strings.TrimLeft(v, "0123456789") == "" {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || secs > int64(maxRetryAfter/time.Second) {
			return maxRetryAfter, true
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}
