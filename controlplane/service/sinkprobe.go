package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/otelcol-svc/otelcol-svc/controlplane/auth"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/outbound"
	"github.com/otelcol-svc/otelcol-svc/internal/textfmt"
	"github.com/otelcol-svc/otelcol-svc/internal/webhooksig"
)

// TestMessageText is the text of a destination's test message.
const TestMessageText = "Test message from otelcol-svc"

const (
	// sinkTestTimeout bounds a test call: the page waits for it.
	sinkTestTimeout = 10 * time.Second
	// excerptBytes is how much of the destination's answer is shown.
	excerptBytes = 512
	// testsPerMinute bounds the test messages of one project: a test is a call the
	// service makes at a user's request, so it must not become a way to flood a URL.
	testsPerMinute = 20
)

// testLimiter counts test messages per project, after the caller's rights are checked
// (a stranger cannot spend a project's allowance).
var testLimiter = auth.NewLimiter(testsPerMinute, time.Minute)

// SinkTestResult is what a test message met.
type SinkTestResult struct {
	Delivered       bool   `json:"delivered"`
	StatusCode      int    `json:"status_code"`
	Error           string `json:"error"`
	LatencyMS       int64  `json:"latency_ms"`
	ResponseExcerpt string `json:"response_excerpt"`
}

// TestSink sends a test message to one destination now, rendered and signed as the data
// plane sends results, through the same SSRF-safe client and allow list. Owners and
// admins only, as the other sink writes: it makes the service call out.
func (s *Service) TestSink(ctx context.Context, userID, id, sinkID string) (SinkTestResult, error) {
	var sk store.Sink
	var secret string
	err := s.InProject(ctx, userID, id, Read, func(ctx context.Context, tx *store.Tx, p store.Project, role string, _ *mirror.Store) error {
		if role == store.RoleMember {
			return apierror.New(http.StatusForbidden, apierror.Forbidden, "only the project's owner and admins can send test messages")
		}
		var err error
		sk, err = FindSink(ctx, tx, p.ID, sinkID)
		secret = p.SigningSecret
		return err
	})
	if err != nil {
		return SinkTestResult{}, err
	}
	if ok, wait := testLimiter.Take(id, time.Now()); !ok {
		e := apierror.New(http.StatusTooManyRequests, apierror.RateLimited,
			fmt.Sprintf("at most %d test messages a minute per project; try again in %d s", testsPerMinute, int(wait.Seconds())+1))
		e.RetryAfter = wait
		return SinkTestResult{}, e
	}
	client := outbound.NewClient(outbound.Options{AllowCIDRs: s.OutboundAllow, Timeout: sinkTestTimeout})
	var res SinkTestResult
	if sk.Config.Kind == KindSlackApp {
		apiURL := s.SlackAPIURL
		if apiURL == "" {
			apiURL = DefaultSlackAPIURL
		}
		res = SendSlackTestMessage(ctx, client, apiURL, id, sk.Config)
	} else {
		res = SendTestMessage(ctx, client, id, secret, sk.Config)
	}
	if s.Logger != nil {
		// The URL may hold the destination's credential; its id says which one.
		s.Logger.Info("test message sent", "project", id, "sink", sk.ID, "delivered", res.Delivered, "status", res.StatusCode)
	}
	return res, nil
}

// SendTestMessage sends sink the test message of project projectID with client (which
// decides which addresses may be reached) and reports what happened; it never fails,
// a failure is the report.
func SendTestMessage(ctx context.Context, client *http.Client, projectID, secret string, sink mirror.Sink) SinkTestResult {
	if err := outbound.CheckURL(sink.URL); err != nil {
		return SinkTestResult{Error: "url: " + err.Error()}
	}
	payload, err := json.Marshal(map[string]any{"test": true, "text": TestMessageText, "project_id": projectID})
	if err != nil {
		return SinkTestResult{Error: err.Error()}
	}
	body, method := payload, http.MethodPost
	h := http.Header{}
	switch sink.Kind {
	case "webhook":
		if sink.Method != "" {
			method = sink.Method
		}
		for k, v := range sink.Headers {
			h.Set(k, v)
		}
		requestID := NewID("test_")
		h.Set("X-Request-Id", requestID)
		if err := webhooksig.SetHeaders(h, secret, requestID, time.Now(), body); err != nil {
			return SinkTestResult{Error: "the project's signing secret cannot sign: " + err.Error()}
		}
	case "chat":
		doc, err := textfmt.Decode(payload)
		if err == nil {
			body, err = textfmt.ChatBody(textfmt.Platform(sink.Format, sink.URL), sink.TextTemplate, payload, doc)
		}
		if err != nil {
			return SinkTestResult{Error: "the message could not be rendered: " + err.Error()}
		}
	default:
		return SinkTestResult{Error: "destination kind " + sink.Kind + " is not known"}
	}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "otelcol-svc")
	req, err := http.NewRequestWithContext(ctx, method, sink.URL, bytes.NewReader(body))
	if err != nil {
		return SinkTestResult{Error: "the request could not be made: " + err.Error()}
	}
	req.Header = h
	start := time.Now()
	resp, err := client.Do(req)
	latency := time.Since(start).Milliseconds()
	if err != nil {
		return SinkTestResult{Error: callError(err), LatencyMS: latency}
	}
	defer resp.Body.Close()
	excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, excerptBytes))
	// Reading a little more lets the connection be reused; a huge answer is cut off.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	r := SinkTestResult{StatusCode: resp.StatusCode, LatencyMS: latency, ResponseExcerpt: strings.ToValidUTF8(string(excerpt), "\uFFFD"),
		Delivered: resp.StatusCode >= 200 && resp.StatusCode < 300}
	if !r.Delivered {
		r.Error = "the destination answered " + resp.Status
	}
	return r
}

// callError says why a call failed without the URL, whose path or query may be the
// destination's credential.
func callError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	switch {
	case errors.Is(err, outbound.ErrForbiddenAddress):
		// Its text names the address, why, and SVC_OUTBOUND_ALLOW.
		return strings.TrimPrefix(err.Error(), "dial tcp ")
	case errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "Client.Timeout"):
		return "the destination did not answer within " + sinkTestTimeout.String()
	}
	return err.Error()
}
