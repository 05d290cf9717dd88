package delivery

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

	"github.com/cenkalti/backoff/v5"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/outbound"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
	"github.com/otelcol-svc/otelcol-svc/internal/webhooksig"
)

// Result is how a delivery ended.
type Result struct {
	Delivered bool
	// Aborted: ctx ended, or the process began stopping (pipelinectx.WithDrain) while the
	// delivery was waiting to retry; it is neither delivered nor final. Cause says which.
	Aborted  bool
	Cause    error
	Status   int // the last HTTP status, 0 when there was none
	Attempts int
	Reason   string // why it was not delivered, a sentence for the dead-letter headers
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
	// answer is what the other side answered (at most max_response_bytes), for the
	// delivery log.
	answer []byte
	// sent are the headers the attempt sent, for the delivery log (redacted there).
	sent http.Header
}

// Request is one HTTP request an exporter must deliver: a call to an agent, or a
// result to a sink destination.
type Request struct {
	// Who is "agent", "webhook" or "chat": it names the other side in reasons and logs,
	// and labels the telemetry.
	Who string
	// URLField names the setting the URL comes from, for a sentence about a bad URL.
	URLField  string
	Project   string
	Method    string
	Target    string
	Headers   map[string]string // configured by the user (webhook sinks)
	Body      []byte
	RequestID string
	// SignID is the webhook-id of the signature, the same on every attempt; empty means
	// the request id.
	SignID string
	// Secret signs the request; empty sends it unsigned.
	Secret string
	// Traceparent is the W3C header of an agent call; empty sends none.
	Traceparent string
	// LogID is the delivery id each attempt is logged under; empty logs nothing.
	LogID string
	// Exchange, when set, makes each attempt instead of a request with Body (which is
	// then only what the log shows): for an API reached through its own client library
	// (Slack's Web API), whose calls still get the retries, pace, circuit and log here.
	Exchange Exchange
}

// Exchange makes one attempt with client (the engine's outbound client: refused
// addresses and allow_cidrs apply) within ctx (the attempt's timeout).
type Exchange func(ctx context.Context, client *http.Client) ExchangeResult

// ExchangeResult is how an Exchange's attempt went.
type ExchangeResult struct {
	// Err is a failure to get an answer (connection, timeout, refused address).
	Err error
	// Status is the HTTP status answered (0: none); a non-2xx one is judged as any
	// answer's (408, 429 and 5xx retried, honouring RetryAfter).
	Status     int
	RetryAfter string
	// Refused is why the other side refused the request in a 2xx answer's body (Slack's
	// {"ok": false, "error": ...}), "" when it took it; Retryable says it may take it later.
	Refused   string
	Retryable bool
	// Answer and Sent are the answer's body and the request's headers, for the log.
	Answer []byte
	Sent   http.Header
}

// Deliver makes the request's attempts until one succeeds, one fails finally, the retry
// budget is spent, or ctx ends.
//
// The loop is cenkalti/backoff's Retry (the collector's own retry uses the same library);
// what it cannot express is in callBackOff. configretry.BackOffConfig is not the config
// because it cannot express ours either: its randomization is plus or minus a factor
// around the interval, not full jitter, and its Validate refuses a budget shorter than
// max_interval, which is valid here (SVC_AGENT_RETRY_BUDGET=20s with the default
// max_interval of 30s: the last wait is cut to the budget).
func (e *Engine) Deliver(ctx context.Context, o Request) Result {
	if err := outbound.CheckURL(o.Target); err != nil {
		return Result{Reason: o.URLField + " is not valid: " + err.Error()}
	}
	var (
		n       int
		last    attemptResult
		waitErr *waitError
	)
	tg := e.targets.get(o.Project, o.Target)
	defer e.targets.put(tg)
	b := newCallBackOff(e.cfg.Retry, &last)
	// Waits (backoff, the target's pace) end when the process starts stopping
	// (pipelinectx.WithDrain); an attempt being made does not, so a call the agent is
	// answering completes. The delivery is then aborted, not dead-lettered: its records
	// go back to the stream for another process.
	wctx, stopWait := context.WithCancelCause(ctx)
	defer stopWait(nil)
	stopDrain := context.AfterFunc(pipelinectx.DrainFrom(ctx), func() { stopWait(pipelinectx.ErrDraining) })
	defer stopDrain()
	_, err := backoff.Retry(wctx, func() (struct{}, error) {
		// The target's pace comes before the attempt; the wait is within the budget, and
		// a delivery not let through is not an attempt.
		probe, err := e.targets.admit(wctx, tg, b.deadline)
		if err != nil {
			if !errors.As(err, &waitErr) {
				return struct{}{}, backoff.Permanent(errAborted)
			}
			return struct{}{}, backoff.Permanent(errWaited)
		}
		n++
		began := time.Now()
		last = e.attempt(ctx, o)
		switch e.targets.report(ctx, tg, probe, last) {
		case circuitOpen:
			e.logger.Warn("circuit opened: deliveries to this target wait, one probe per interval",
				zap.String("project", o.Project), zap.String("target", tg.origin), zap.String("who", o.Who),
				zap.String("last", last.reason), zap.Duration("probe_interval", e.cfg.Target.Circuit.ProbeInterval))
			e.circuitOpened(o, tg.origin, last.reason)
		case circuitClosed:
			e.logger.Info("circuit closed: the target answered a probe",
				zap.String("project", o.Project), zap.String("target", tg.origin), zap.String("who", o.Who))
		}
		if o.LogID != "" && last.class != classAborted {
			e.log.attempt(o.Project, o.LogID, deliverylog.Attempt{At: began, StatusCode: last.status, Error: last.reason,
				LatencyMS: time.Since(began).Milliseconds(), RequestHeaders: deliverylog.LogHeaders(last.sent, o.Headers)}, last.answer)
		}
		switch last.class {
		case classOK:
			e.tel.Attempt(ctx, o.Who, AttemptOK)
			return struct{}{}, nil
		case classAborted:
			return struct{}{}, backoff.Permanent(errAborted)
		case classFinal:
			e.tel.Attempt(ctx, o.Who, AttemptFinal)
			return struct{}{}, backoff.Permanent(errFinal)
		}
		e.tel.Attempt(ctx, o.Who, AttemptRetryable)
		return struct{}{}, errRetryable
	},
		backoff.WithBackOff(b),
		// The budget is callBackOff's: Retry's own limit would skip the last attempt
		// instead of cutting the wait before it.
		backoff.WithMaxElapsedTime(0),
		backoff.WithNotify(func(_ error, wait time.Duration) {
			// The retry is scheduled here: the console shows when it is due.
			if o.LogID != "" {
				e.log.nextAttempt(o.Project, o.LogID, time.Now().Add(wait))
			}
			e.logger.Debug(o.Who+" delivery attempt failed; retrying",
				zap.String("project", o.Project), zap.String("request_id", o.RequestID),
				zap.Int("attempt", n), zap.String("last", last.reason), zap.Duration("in", wait))
		}),
	)
	switch {
	case err == nil:
		return Result{Delivered: true, Status: last.status, Attempts: n}
	case errors.Is(err, errFinal):
		return Result{Status: last.status, Attempts: n, Reason: last.reason}
	case errors.Is(err, errWaited):
		return Result{Status: last.status, Attempts: n, Reason: waitedOut(b.budget, n, last, waitErr)}
	case errors.Is(err, errRetryable) && wctx.Err() == nil:
		reason := b.exhausted(n, last)
		if tg.isOpen() {
			reason += " (the circuit to " + tg.origin + " is open after sustained failure)"
		}
		return Result{Status: last.status, Attempts: n, Reason: reason}
	}
	cause := context.Cause(wctx)
	if cause == nil {
		cause = context.Canceled
	}
	return Result{Aborted: true, Cause: cause, Status: last.status, Attempts: n}
}

// Outcomes of an attempt, for backoff.Retry.
var (
	errRetryable = errors.New("retryable")
	errFinal     = errors.New("final")
	errAborted   = errors.New("aborted")
	// errWaited: the budget ended while the target held the delivery back.
	errWaited = errors.New("waited")
)

// waitedOut is the dead letter's reason when the budget ended while the delivery waited
// for its target.
func waitedOut(budget time.Duration, n int, last attemptResult, w *waitError) string {
	s := fmt.Sprintf("retry budget of %s exhausted after %d %s while %s", budget, n, plural(n, "attempt"), w.Error())
	if n > 0 {
		s += "; last: " + last.reason
	}
	return s
}

// callBackOff is the wait before each further attempt of one call: the agent's
// Retry-After when it sent one, else exponential backoff with full jitter, never past the
// call's budget (the retry.max_elapsed_time after its first attempt).
//
// The growing ceiling is backoff.ExponentialBackOff's (doubling, capped at max_interval,
// without its own randomization); the wait is drawn uniformly below it by hand: the
// library's jitter is plus or minus a factor, and full jitter spreads the retries of many
// calls over the whole interval, so they do not hit a recovering agent all at once.
type callBackOff struct {
	exp      backoff.ExponentialBackOff
	budget   time.Duration
	deadline time.Time
	last     *attemptResult
	// Why the retries stopped, for the dead letter's reason.
	fromAgent bool
	wait      time.Duration
	remaining time.Duration
}

func newCallBackOff(cfg RetryConfig, last *attemptResult) *callBackOff {
	return &callBackOff{
		exp: backoff.ExponentialBackOff{
			InitialInterval: cfg.InitialInterval,
			MaxInterval:     cfg.MaxInterval,
			Multiplier:      2,
		},
		budget: cfg.MaxElapsedTime,
		last:   last,
	}
}

// Reset starts a call: Retry calls it before the first attempt.
func (b *callBackOff) Reset() {
	b.exp.Reset()
	b.deadline = time.Now().Add(b.budget)
}

// NextBackOff is the wait after a retryable attempt, or backoff.Stop when the budget
// does not allow another one.
func (b *callBackOff) NextBackOff() time.Duration {
	ceiling := b.exp.NextBackOff()
	b.wait, b.fromAgent = time.Duration(rand.Int64N(int64(ceiling)+1)), false
	if b.last != nil && b.last.hasRetryAfter && b.last.retryAfter > 0 {
		b.wait, b.fromAgent = b.last.retryAfter, true
	}
	b.remaining = time.Until(b.deadline)
	// An agent's Retry-After is not cut short: waiting less would only be refused again.
	if b.remaining <= 0 || (b.fromAgent && b.wait > b.remaining) {
		return backoff.Stop
	}
	return min(b.wait, b.remaining)
}

func (b *callBackOff) exhausted(n int, a attemptResult) string {
	return exhausted(b.budget, n, a, b.fromAgent, b.wait, b.remaining)
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

// attempt makes one request, bounded by the configured timeout.
func (e *Engine) attempt(ctx context.Context, o Request) attemptResult {
	actx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	if o.Exchange != nil {
		return e.exchange(ctx, actx, o)
	}
	method := o.Method
	if method == "" {
		method = http.MethodPost
	}
	req, err := http.NewRequestWithContext(actx, method, o.Target, bytes.NewReader(o.Body))
	if err != nil {
		return attemptResult{class: classFinal, reason: o.URLField + " is not valid: the request could not be built"}
	}
	if err := e.setHeaders(req.Header, o); err != nil {
		return attemptResult{class: classFinal, reason: "the project's signing secret cannot sign: " + err.Error()}
	}
	resp, err := e.client.Do(req)
	if err != nil {
		r := e.classifyError(ctx, err)
		r.sent = req.Header
		return r
	}
	defer resp.Body.Close()
	// An answer the other side started to send counts by its status, even if its body is
	// cut short: a 2xx means it took the request.
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, e.cfg.MaxResponseBytes))
	r := classifyStatus(o.Who, resp.StatusCode, resp.Header.Get("Retry-After"), answer, time.Now())
	r.answer = answer
	r.sent = req.Header
	return r
}

// exchange makes one attempt of a request with an Exchange, judged as an HTTP answer
// is, and a 2xx that refuses the request by its body's reason.
func (e *Engine) exchange(ctx, actx context.Context, o Request) attemptResult {
	x := o.Exchange(actx, e.client)
	answer := x.Answer[:min(int64(len(x.Answer)), e.cfg.MaxResponseBytes)]
	var r attemptResult
	switch {
	case x.Status == 0:
		err := x.Err
		if err == nil {
			err = errors.New("no answer")
		}
		r = e.classifyError(ctx, err)
	case x.Status < 200 || x.Status >= 300 || x.Refused == "":
		r = classifyStatus(o.Who, x.Status, x.RetryAfter, answer, time.Now())
	case x.Retryable:
		d, ok := parseRetryAfter(x.RetryAfter, time.Now())
		r = attemptResult{class: classRetryable, status: x.Status, retryAfter: d, hasRetryAfter: ok, reason: x.Refused}
	default:
		r = attemptResult{class: classFinal, status: x.Status, reason: o.Who + " refused the request: " + x.Refused}
	}
	r.answer, r.sent = answer, x.Sent
	return r
}

func (e *Engine) setHeaders(h http.Header, o Request) error {
	// The user's headers first, so ours win (the control plane refuses reserved names,
	// but a mirror entry written otherwise must not override the signature).
	for k, v := range o.Headers {
		h.Set(k, v)
	}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", e.userAgent)
	h.Set("X-Request-Id", o.RequestID)
	if o.Traceparent != "" {
		h.Set("traceparent", o.Traceparent)
	}
	if o.Secret == "" {
		return nil
	}
	id := o.SignID
	if id == "" {
		id = o.RequestID
	}
	// A fresh timestamp per attempt: a retry long after the first attempt must not fall
	// outside the receiver's replay window.
	return webhooksig.SetHeaders(h, o.Secret, id, time.Now(), o.Body)
}

func (e *Engine) classifyError(ctx context.Context, err error) attemptResult {
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
