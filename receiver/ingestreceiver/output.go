package ingestreceiver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/eventjson"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
	"github.com/otelcol-svc/otelcol-svc/internal/requestid"
)

// agentOutput is the body of POST /internal/agent-output (docs/contract.md#section-3).
type agentOutput struct {
	RequestID string          `json:"request_id"`
	Payload   json.RawMessage `json:"payload"`
}

// handleAgentOutput takes an agent's result, authenticated with the project's API key,
// and stores its payload (bytes as sent) on the project's output stream for the sinks.
func (r *ingestReceiver) handleAgentOutput(w http.ResponseWriter, req *http.Request) {
	id, e := r.agentOutput(w, req)
	if e != nil {
		apierror.Write(w, e)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"accepted": true, "request_id": id})
}

func (r *ingestReceiver) agentOutput(w http.ResponseWriter, req *http.Request) (string, *apierror.Error) {
	if req.Method != http.MethodPost {
		return "", methodNotAllowed(w)
	}
	if r.logs == nil {
		return "", apierror.New(http.StatusNotFound, apierror.NotFound, "this receiver is not part of a logs pipeline, which carries agent results")
	}
	ctx, aerr := r.authenticateResults(req)
	if aerr != nil {
		return "", aerr
	}
	if mt := mediaType(req); mt != jsonContentType {
		return "", apierror.New(http.StatusUnsupportedMediaType, apierror.UnsupportedMediaType,
			fmt.Sprintf("unsupported Content-Type %q; send application/json", req.Header.Get("Content-Type")))
	}
	t := r.admit.ticket(tenantOf(ctx))
	defer t.release()
	body, aerr := r.readBody(req, t)
	if aerr != nil {
		return "", aerr
	}
	if err := t.reserve(costPerBodyByte * int64(len(body))); err != nil {
		return "", r.busy(err)
	}
	out, aerr := parseAgentOutput(body, req.Header.Get("X-Request-Id"))
	if aerr != nil {
		return "", aerr
	}
	p, _ := principal.FromContext(ctx)
	info := pipelinectx.Ingest{Prebuilt: "agent_output", Output: true, RequestID: out.RequestID, Unmatched: r.unmatched(p.ProjectID, out.RequestID)}
	if err := r.consumePrebuilt(ctx, info, [][]byte{out.Payload}); err != nil {
		return "", r.consumeError(err)
	}
	r.results.count(p.ProjectID, info.Unmatched)
	r.attachIncidentResult(ctx, p.ProjectID, out.RequestID, out.Payload, info.Unmatched)
	return out.RequestID, nil
}

// parseAgentOutput reads request_id and payload and takes the request id from the body,
// else from the X-Request-Id header. Other top-level fields are ignored, not refused:
// agents written elsewhere add their own metadata (a model name, a trace id), and a
// refusal there lost the whole result. A misspelt request_id or payload still fails, as
// the field it should have been is then missing.
func parseAgentOutput(body []byte, headerID string) (agentOutput, *apierror.Error) {
	var out agentOutput
	if err := eventjson.Check(body); err != nil {
		return out, bodyError(err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&out); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return out, apierror.New(http.StatusBadRequest, apierror.InvalidJSON, "the body is not valid JSON: "+err.Error())
		}
		// encoding/json names Go types ("Go value of type ingestreceiver.agentOutput"),
		// which mean nothing to a caller: say what was wrong in JSON's terms. request_id
		// is the only field with a type (payload takes any value).
		reason := strings.TrimPrefix(err.Error(), "json: ")
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			reason = fmt.Sprintf("%s must be a string, not %s", typ.Field, jsonKind(typ.Value))
			if typ.Field == "" {
				reason = "the body must be a JSON object, not " + jsonKind(typ.Value)
			}
		}
		return out, apierror.New(http.StatusBadRequest, apierror.InvalidBody, `send {"request_id": "<the X-Request-Id you were called with>", "payload": <your result>}: `+reason)
	}
	if dec.More() {
		return out, apierror.New(http.StatusBadRequest, apierror.InvalidJSON, "the body holds more than one JSON value")
	}
	if out.RequestID == "" {
		out.RequestID = headerID
	}
	if out.RequestID == "" {
		return out, apierror.New(http.StatusBadRequest, apierror.InvalidBody, "request_id is required: the X-Request-Id of the call this result answers (in the body, or as the X-Request-Id header)")
	}
	if len(out.RequestID) > maxHeaderValue || !printable(out.RequestID) {
		return out, apierror.New(http.StatusBadRequest, apierror.InvalidBody, fmt.Sprintf("request_id must be at most %d printable ASCII characters", maxHeaderValue))
	}
	if len(bytes.TrimSpace(out.Payload)) == 0 {
		return out, apierror.New(http.StatusBadRequest, apierror.InvalidBody, "payload is required: the agent's result, any JSON value")
	}
	return out, nil
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// jsonKind names a JSON value's kind as UnmarshalTypeError.Value gives it, with an article.
func jsonKind(v string) string {
	switch v {
	case "array", "object":
		return "an " + v
	case "bool":
		return "true or false"
	}
	return "a " + v
}

// unmatched reports whether a result for project names a call the service never issued
// to it (made up, or another project's): it is stored all the same, marked, so the owner
// notices. Before the key is loaded nothing is marked: a false alarm on every result
// would teach owners to ignore the mark.
func (r *ingestReceiver) unmatched(project, requestID string) bool {
	ids := r.ids.Load()
	return ids != nil && !ids.Issued(project, requestID)
}

const (
	issuerLoadTimeout  = 5 * time.Second
	issuerRetryInitial = 250 * time.Millisecond
	issuerRetryMax     = 30 * time.Second
)

// startIssuer loads the deployment's request-id key in the background, retrying while
// NATS is away: the receiver must start, and take results, without it.
func (r *ingestReceiver) startIssuer(js jetstream.JetStream) {
	if js == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.stopIDs = cancel
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.loadIssuer(ctx, js)
	}()
}

func (r *ingestReceiver) loadIssuer(ctx context.Context, js jetstream.JetStream) {
	wait := issuerRetryInitial
	for logged := false; ; logged = true {
		lctx, cancel := context.WithTimeout(ctx, issuerLoadTimeout)
		ids, err := requestid.Load(lctx, js)
		cancel()
		if err == nil {
			r.ids.Store(ids)
			return
		}
		if !logged {
			r.settings.Logger.Debug("request-id key not loaded yet: agent results are not marked unmatched until it is; retrying", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, issuerRetryMax)
	}
}
