package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
)

// GET /console/v1/projects/{project_id}/deliveries?state=&kind=&since=&limit=: the
// project's deliveries (agent calls and sink deliveries), newest first, without bodies.
// GET /console/v1/projects/{project_id}/deliveries/{delivery_id}: one, with its attempt
// log and bodies (docs/contract.md#section-11).
//
// Both carry next_attempt_at while a delivery waits for a retry, and each attempt its
// request_headers. Those were redacted when written (deliverylog.LogHeaders), not here:
// any console credential of the project reads them, a member's token and the project's
// API key among them, so the log holds no secret to hide.

const msgNoDelivery = "no such delivery in this project (deliveries are kept for 7 days)"

func deliveriesEndpoint() endpoint {
	return endpoint{name: "deliveries", parse: query(func(q url.Values) (readFunc, *apierror.Error) {
		f, err := deliverylog.ParseFilter(q)
		if err != nil {
			return nil, apierror.New(http.StatusBadRequest, apierror.InvalidBody, err.Error())
		}
		return func(ctx context.Context, js jetstream.JetStream, projectID string) (any, error) {
			out := []deliverylog.Delivery{}
			r, err := reader(ctx, js)
			if r == nil {
				return map[string]any{"deliveries": out}, err
			}
			ds, err := r.List(ctx, projectID, f)
			if err != nil {
				return nil, err
			}
			for _, d := range ds {
				// A call's raw sequences (up to 10,000) serve its trace, not a list.
				d.Seqs = nil
				out = append(out, d)
			}
			return map[string]any{"deliveries": out}, nil
		}, nil
	})}
}

func deliveryEndpoint() endpoint {
	return endpoint{name: "deliveries/{delivery_id}", parse: func(req *http.Request) (readFunc, *apierror.Error) {
		id := req.PathValue("delivery_id")
		return func(ctx context.Context, js jetstream.JetStream, projectID string) (any, error) {
			r, err := reader(ctx, js)
			if r == nil {
				if err == nil {
					err = apierror.New(http.StatusNotFound, apierror.NotFound, msgNoDelivery)
				}
				return nil, err
			}
			d, err := r.Get(ctx, projectID, id)
			if errors.Is(err, deliverylog.ErrNotFound) || errors.Is(err, deliverylog.ErrInvalidID) {
				return nil, apierror.New(http.StatusNotFound, apierror.NotFound, msgNoDelivery)
			}
			if err != nil {
				return nil, err
			}
			return newDeliveryDetail(d), nil
		}, nil
	}}
}

// reader opens the delivery log for reading; nil without an error when nothing was ever
// logged (the stream does not exist yet). The console never creates the stream: its
// limits are the writer's to set.
func reader(ctx context.Context, js jetstream.JetStream) (*deliverylog.Reader, error) {
	s, err := js.Stream(ctx, deliverylog.StreamName)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return deliverylog.NewReader(s), nil
}

// deliveryDetail is a delivery as the contract names it: the stored answer is
// response_body, and both bodies are JSON when what was stored is valid JSON, else a
// string (a truncated body is rarely valid JSON, so it comes back as a string).
type deliveryDetail struct {
	deliverylog.Delivery
	// These shadow the stored fields of the same JSON names (encoding/json prefers the
	// shallower field).
	AttemptLog        []deliverylog.Attempt `json:"attempt_log"`
	RequestBody       json.RawMessage       `json:"request_body,omitempty"`
	ResponseBody      json.RawMessage       `json:"response_body,omitempty"`
	ResponseTruncated bool                  `json:"response_truncated,omitempty"`
}

func newDeliveryDetail(d deliverylog.Delivery) deliveryDetail {
	out := deliveryDetail{AttemptLog: d.AttemptLog, RequestBody: asJSON(d.RequestBody), ResponseBody: asJSON(d.Answer), ResponseTruncated: d.AnswerTruncated}
	if out.AttemptLog == nil {
		out.AttemptLog = []deliverylog.Attempt{}
	}
	d.AttemptLog, d.RequestBody, d.Answer, d.AnswerTruncated = nil, nil, nil, false
	out.Delivery = d
	return out
}

// asJSON keeps a body that is JSON as it is, and turns anything else into a JSON string
// (invalid UTF-8 replaced); nil for no body.
func asJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	if json.Valid(b) {
		return b
	}
	s, _ := json.Marshal(string(b))
	return s
}
