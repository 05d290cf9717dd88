package ingestreceiver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/otelcol-svc/otelcol-svc/components/apierror"
	"github.com/otelcol-svc/otelcol-svc/components/eventjson"
	"github.com/otelcol-svc/otelcol-svc/components/ingestctx"
)

// agentOutput is the body of POST /internal/agent-output (contract section 3).
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
	ctx, aerr := r.authenticate(req)
	if aerr != nil {
		return "", aerr
	}
	if mt := mediaType(req); mt != jsonContentType {
		return "", apierror.New(http.StatusUnsupportedMediaType, apierror.UnsupportedMediaType,
			fmt.Sprintf("unsupported Content-Type %q; send application/json", req.Header.Get("Content-Type")))
	}
	t := r.admit.ticket()
	defer t.release()
	body, aerr := r.readBody(req, t)
	if aerr != nil {
		return "", aerr
	}
	if !t.reserve(costPerBodyByte * int64(len(body))) {
		return "", r.busy()
	}
	out, aerr := parseAgentOutput(body, req.Header.Get("X-Request-Id"))
	if aerr != nil {
		return "", aerr
	}
	err := r.consumePrebuilt(ctx, ingestctx.Info{Prebuilt: "agent_output", Output: true, RequestID: out.RequestID}, [][]byte{out.Payload})
	if err != nil {
		return "", r.consumeError(err)
	}
	return out.RequestID, nil
}

// parseAgentOutput decodes the body strictly (a misspelt field is an error, not a lost
// result) and takes the request id from the body, else from the X-Request-Id header.
func parseAgentOutput(body []byte, headerID string) (agentOutput, *apierror.Error) {
	var out agentOutput
	if err := eventjson.Check(body); err != nil {
		return out, bodyError(err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
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
