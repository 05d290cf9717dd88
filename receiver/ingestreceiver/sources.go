package ingestreceiver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/records"
	"github.com/otelcol-svc/otelcol-svc/internal/envelope"
	"github.com/otelcol-svc/otelcol-svc/internal/eventjson"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/pipelinectx"
	"github.com/otelcol-svc/otelcol-svc/internal/sourceverify"
	"github.com/otelcol-svc/otelcol-svc/receiver/ingestreceiver/internal/console"
)

// dataPlaneAuth is what the projectauth extension offers beside extensionauth.Server: push
// ingest and console authentication, and its NATS connection for console reads.
type dataPlaneAuth interface {
	AuthenticateIngest(ctx context.Context, headers map[string][]string, ingestKey string) (context.Context, mirror.Source, error)
	console.Authenticator
}

const pushPrefix = "/ingest/"

// handlePush takes POST /ingest/<ingest_key> (docs/contract.md#section-3 to #section-5): one JSON object, a
// JSON array of objects or NDJSON from anything that can POST JSON. Each object is wrapped
// in its source's envelope and stored as one "source" record on the project's raw stream,
// with the source id in the Svc-Source-Id header.
func (r *ingestReceiver) handlePush(w http.ResponseWriter, req *http.Request) {
	quota := new(pipelinectx.Quota)
	n, e := r.push(w, req, quota)
	if e != nil {
		apierror.Write(w, e)
		return
	}
	if n == answeredChallenge {
		return
	}
	writeQuota(w, quota)
	writeJSON(w, http.StatusAccepted, map[string]int{"accepted": n})
}

func (r *ingestReceiver) push(w http.ResponseWriter, req *http.Request, quota *pipelinectx.Quota) (int, *apierror.Error) {
	if req.Method != http.MethodPost {
		return 0, methodNotAllowed(w)
	}
	// /ingest/<ingest_key>, or /ingest/<ingest_key>/<url_token> for a source whose sender
	// can be given nothing but a URL.
	ingestKey, urlToken, withToken := strings.Cut(strings.TrimPrefix(req.URL.Path, pushPrefix), "/")
	if ingestKey == "" || withToken && (urlToken == "" || strings.Contains(urlToken, "/")) {
		return 0, apierror.New(http.StatusNotFound, apierror.NotFound, "POST to /ingest/<ingest_key>, the ingest URL shown when the source was created")
	}
	if r.logs == nil {
		return 0, apierror.New(http.StatusNotFound, apierror.NotFound, "this receiver is not part of a logs pipeline, which carries push sources' records")
	}
	if r.dp == nil {
		// The sender did nothing wrong: the receiver is configured with an authenticator
		// that cannot resolve ingest keys (Start logged it).
		return 0, apierror.New(http.StatusInternalServerError, apierror.Internal, "push ingest is not available because of a server configuration problem; nothing was stored")
	}
	ctx, src, err := r.dp.AuthenticateIngest(req.Context(), req.Header, ingestKey)
	if err != nil {
		return 0, r.authRefusal(err)
	}
	if withToken && !takesURLToken(src) {
		// Only a url_token source has URLs below its ingest URL; the token of a source
		// authenticated by its ingest key instead is not needed (nor checked).
		return 0, apierror.New(http.StatusNotFound, apierror.NotFound, msgNoTokenURL)
	}
	idem := req.Header.Get("Idempotency-Key")
	if len(idem) > maxHeaderValue {
		return 0, apierror.New(http.StatusBadRequest, apierror.InvalidBody, fmt.Sprintf("Idempotency-Key is longer than %d bytes", maxHeaderValue))
	}
	t, body, aerr := r.admittedBody(ctx, req)
	if aerr != nil {
		return 0, aerr
	}
	defer t.release()
	// The raw body, before anything reads it: a request the sender did not sign stores
	// nothing, and costs no parsing.
	if e := r.verify(ctx, src, req.Header, urlToken, body); e != nil {
		return 0, e
	}
	if challenge, ok := slackChallenge(src, body); ok {
		writeJSON(w, http.StatusOK, map[string]string{"challenge": challenge})
		return answeredChallenge, nil
	}
	received := time.Now()
	info := pipelinectx.Ingest{Prebuilt: records.SignalSource, IdempotencyKey: pushMsgID(src.ID, idem), SourceID: src.ID, Quota: quota}
	if idem != "" {
		// The envelope's timestamp is the time received, new on every retry: the body is
		// the request, the source (already in the key) what shapes its records.
		info.RequestDigest = requestDigest(body, "ingest")
	}
	if src.Preset != "" {
		return r.pushPreset(ctx, src, req.Header, body, received, info)
	}
	objs, err := eventjson.Objects(body, r.cfg.MaxObjectsPerRequest)
	if err != nil {
		e := r.countRefusal(ctx, bodyError(err), 1)
		switch mediaType(req) {
		case "application/x-www-form-urlencoded", "multipart/form-data":
			if e.Status == http.StatusBadRequest {
				e.Message += "; this URL takes JSON: set the sender's content type to application/json"
			}
		}
		return 0, e
	}
	recs := make([][]byte, len(objs))
	for i, obj := range objs {
		recs[i] = envelope.BuildObject(src, obj, received).Record
	}
	if id := slackEventID(src, objs); id != "" {
		info.RecordIDs = []string{pushMsgID(src.ID, "slack:"+id)}
	}
	if err := r.consumePrebuilt(ctx, info, recs); err != nil {
		return 0, r.consumeError(err)
	}
	return len(recs), nil
}

// slackEventID is the event_id of a Slack Events API delivery to a slack-verified source:
// Slack sends an event again (X-Slack-Retry-Num) when the answer took over 3 s, with the
// same event_id, which then makes it the record's message id so the retry is stored once.
// An id that is not a plain token is not used (it becomes a NATS header).
func slackEventID(src mirror.Source, objs [][]byte) string {
	if src.Verification == nil || src.Verification.Scheme != sourceverify.SchemeSlack || len(objs) != 1 {
		return ""
	}
	var v struct {
		EventID string `json:"event_id"`
	}
	if json.Unmarshal(objs[0], &v) != nil || v.EventID == "" || len(v.EventID) > 128 {
		return ""
	}
	for _, c := range v.EventID {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return ""
		}
	}
	return v.EventID
}

// answeredChallenge is push's count when it answered the request itself, storing nothing.
const answeredChallenge = -1

// slackChallenge is the challenge of Slack's url_verification request, which Slack sends,
// signed, to an Event Subscriptions Request URL before it sends any event, and which it
// takes as proof of the URL only when answered 200 with the challenge echoed. Only a
// source verified by the slack scheme answers it, once its signature passed; the request
// is not an event, so nothing is stored.
func slackChallenge(src mirror.Source, body []byte) (string, bool) {
	if src.Verification == nil || src.Verification.Scheme != sourceverify.SchemeSlack {
		return "", false
	}
	var v struct {
		Type      string `json:"type"`
		Challenge string `json:"challenge"`
	}
	if json.Unmarshal(body, &v) != nil || v.Type != "url_verification" || v.Challenge == "" {
		return "", false
	}
	return v.Challenge, true
}

// pushMsgID is the message id of a push request's records. Deduplication is per stream,
// that is per project, and each sender numbers its deliveries its own way: with the bare
// key, a delivery "1" of one source would silently drop the delivery "1" of another
// within the duplicate window. (/v1/events keeps the bare key: the contract says so, and
// its keys are the project's own.)
func pushMsgID(sourceID, idempotencyKey string) string {
	if idempotencyKey == "" {
		return ""
	}
	return "src:" + sourceID + ":" + idempotencyKey
}

// authRefusal answers a refusal of the push-ingest or console authenticator.
func (r *ingestReceiver) authRefusal(err error) *apierror.Error {
	switch {
	case errors.Is(err, principal.ErrNotReady):
		e := apierror.New(http.StatusServiceUnavailable, apierror.Unavailable,
			principal.Message(err, "the receiver is still loading its configuration; retry in a moment"))
		e.RetryAfter = r.cfg.RetryAfter
		return e
	case errors.Is(err, principal.ErrNotFound):
		return apierror.New(http.StatusNotFound, apierror.NotFound, principal.Message(err, "not found"))
	case errors.Is(err, principal.ErrMissingKey):
		return apierror.New(http.StatusUnauthorized, apierror.MissingAPIKey, principal.Message(err, "no credentials: send an API key"))
	case errors.Is(err, principal.ErrInvalidToken):
		return apierror.New(http.StatusUnauthorized, apierror.InvalidToken, principal.Message(err, "the token is not valid"))
	case errors.Is(err, principal.ErrInsufficientScope):
		return apierror.New(http.StatusForbidden, apierror.InsufficientScope, principal.Message(err, "the API key lacks the scope this needs"))
	default:
		return apierror.New(http.StatusUnauthorized, apierror.InvalidAPIKey, principal.Message(err, "the API key is not valid"))
	}
}
