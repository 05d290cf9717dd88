package ingestreceiver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"
	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/incident"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/sourceverify"
	"github.com/otelcol-svc/otelcol-svc/receiver/ingestreceiver/internal/console"
)

// POST /slack/interactions/{project_id}/{sink_id} is a slack_app destination's Request URL
// (Slack app settings, Interactivity & Shortcuts): Slack posts there when someone presses a
// button of an incident's message. No API key comes with it; Slack signs the body with
// the app's signing secret, which the destination holds, and that signature is the
// credential: a request it does not verify changes nothing.

const (
	slackInteractionsPattern = "/slack/interactions/{project_id}/{sink_id}"
	// maxSlackBody bounds an interaction's body: a block_actions payload with our
	// message's blocks is a few KiB.
	maxSlackBody = 64 << 10
	// slackActionPrefix starts the action_id of the incident buttons the sink posts
	// (incident_acknowledge, ...); the rest is the console's action.
	slackActionPrefix = "incident_"
	// maxSlackUser bounds the user name taken into "by".
	maxSlackUser = 128
	// sinkKindSlackApp is the destination kind whose buttons post here.
	sinkKindSlackApp = "slack_app"

	msgNoSlackSink = "no Slack app destination has this interactions URL: copy it from the destination's panel (it names the project and the destination)"
)

// slackAction is what a button press asks for.
type slackAction struct {
	Action, IncidentID, By string
}

// slackPayload holds the only fields of an interaction we act on, so a change anywhere
// else in Slack's payload (its message blocks, its view, its state) never breaks a button.
type slackPayload struct {
	Type string `json:"type"`
	User struct {
		ID       string `json:"id"`
		Username string `json:"username"`
		Name     string `json:"name"`
	} `json:"user"`
	Actions []struct {
		ActionID string `json:"action_id"`
		Value    string `json:"value"`
	} `json:"actions"`
}

// errSlackIgnored is an interaction that is well formed but asks nothing of us (another
// kind of interaction, another app's button): answered 200 so Slack shows no error.
var errSlackIgnored = errors.New("not an incident button")

// parseSlackInteraction reads Slack's form body (payload=<JSON>) into the action it asks
// for; errSlackIgnored for an interaction that is not one of our buttons.
func parseSlackInteraction(body []byte) (slackAction, error) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return slackAction{}, fmt.Errorf("the body is not a form: %w", err)
	}
	raw := form.Get("payload")
	if raw == "" {
		return slackAction{}, errors.New("the form has no payload field: send Slack's interaction payload as payload=<JSON>")
	}
	var p slackPayload
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		return slackAction{}, fmt.Errorf("the payload is not Slack's interaction JSON: %w", err)
	}
	if p.Type != string(slack.InteractionTypeBlockActions) || len(p.Actions) == 0 {
		return slackAction{}, errSlackIgnored
	}
	act, ok := strings.CutPrefix(p.Actions[0].ActionID, slackActionPrefix)
	if !ok || !console.IsIncidentAction(act) {
		return slackAction{}, errSlackIgnored
	}
	user := ""
	for _, u := range []string{p.User.Username, p.User.Name, p.User.ID} {
		if user = slackUser(u); user != "" {
			break
		}
	}
	if user == "" {
		user = "unknown"
	}
	return slackAction{Action: act, IncidentID: p.Actions[0].Value, By: "slack:" + user}, nil
}

// slackUser is a Slack user name fit for "by": no control characters, at most
// maxSlackUser bytes, cut between characters.
func slackUser(u string) string {
	u = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, u)
	if len(u) > maxSlackUser {
		n := maxSlackUser
		for n > 0 && !utf8.RuneStart(u[n]) {
			n--
		}
		u = u[:n]
	}
	return strings.TrimSpace(u)
}

func (r *ingestReceiver) handleSlackInteraction(w http.ResponseWriter, req *http.Request) {
	status, e := r.slackInteraction(w, req)
	if e != nil {
		r.settings.Logger.Debug("slack interaction refused", zap.String("project_id", req.PathValue("project_id")),
			zap.String("sink_id", req.PathValue("sink_id")), zap.String("code", e.Code))
		apierror.Write(w, e)
		return
	}
	// Slack wants a 200 within 3 s; the message itself is updated by the notice.
	w.WriteHeader(status)
}

func (r *ingestReceiver) slackInteraction(w http.ResponseWriter, req *http.Request) (int, *apierror.Error) {
	if req.Method != http.MethodPost {
		return 0, methodNotAllowed(w)
	}
	projectID, sinkID := req.PathValue("project_id"), req.PathValue("sink_id")
	if r.dp == nil {
		return 0, apierror.New(http.StatusInternalServerError, apierror.Internal, "Slack interactions are not available because of a server configuration problem")
	}
	cache := r.dp.MirrorCache()
	if cache == nil || !cache.Ready() {
		e := apierror.New(http.StatusServiceUnavailable, apierror.Unavailable, "the receiver is still loading its configuration; retry in a moment")
		e.RetryAfter = r.cfg.RetryAfter
		return 0, e
	}
	proj, ok := cache.Project(projectID)
	if !ok {
		return 0, apierror.New(http.StatusNotFound, apierror.NotFound, msgNoSlackSink)
	}
	sink, ok := slackSink(proj, sinkID)
	if !ok {
		return 0, apierror.New(http.StatusNotFound, apierror.NotFound, msgNoSlackSink)
	}
	req.Body = http.MaxBytesReader(w, req.Body, maxSlackBody)
	// Anyone may post to this URL before the signature is checked: its bodies take a
	// share of max_inflight_bytes of their own, not the account's (which its senders of
	// records use), and a refusal here is no refused record of the account's.
	t := r.admit.ticket("slack:" + proj.ID)
	defer t.release()
	body, aerr := r.readBody(req, t)
	if aerr != nil {
		return 0, aerr
	}
	ctx := principal.NewContext(req.Context(), principal.Principal{ProjectID: proj.ID, AccountID: proj.AccountID})
	// The raw body, before anything reads it: unsigned, nothing is parsed or changed.
	if e := verifySlackInteraction(sink, req.Header, body); e != nil {
		return 0, e
	}
	act, err := parseSlackInteraction(body)
	if errors.Is(err, errSlackIgnored) {
		return http.StatusOK, nil
	}
	if err != nil {
		return 0, apierror.New(http.StatusBadRequest, apierror.InvalidBody, err.Error())
	}
	if _, _, ok := incident.ParseID(act.IncidentID); !ok {
		return 0, apierror.New(http.StatusNotFound, apierror.NotFound, "no such incident in this project")
	}
	js := r.dp.JetStream()
	if js == nil {
		e := apierror.New(http.StatusServiceUnavailable, apierror.Unavailable, "storage (NATS JetStream) is not reachable right now; press the button again in a moment")
		e.RetryAfter = r.cfg.RetryAfter
		return 0, e
	}
	actx, cancel := context.WithTimeout(ctx, slackActTimeout)
	defer cancel()
	// Act publishes the notices (the root message is updated from them) and clears them
	// from the incident's outbox; one it cannot publish waits there for the incident
	// processor's ticker, and the button still answers 200: the action is made.
	if _, err := r.incidents.Act(actx, js, proj.ID, act.IncidentID, act.Action, act.By); err != nil {
		var ae *apierror.Error
		if errors.As(err, &ae) {
			return 0, ae
		}
		r.settings.Logger.Debug("a Slack incident action could not be stored", zap.String("project_id", proj.ID), zap.Error(err))
		e := apierror.New(http.StatusServiceUnavailable, apierror.Unavailable, "storage (NATS JetStream) cannot be written right now; press the button again in a moment")
		e.RetryAfter = r.cfg.RetryAfter
		return 0, e
	}
	return http.StatusOK, nil
}

// slackActTimeout keeps the answer within the 3 s Slack waits for.
const slackActTimeout = 2500 * time.Millisecond

// slackSink is project's slack_app destination id.
func slackSink(p mirror.Project, id string) (mirror.Sink, bool) {
	for _, s := range p.Sinks {
		if s.ID == id && s.Kind == sinkKindSlackApp {
			return s, true
		}
	}
	return mirror.Sink{}, false
}

// verifySlackInteraction checks Slack's v0 signature with the destination's signing
// secret, as push sources verified by the slack scheme are: 401 signature_invalid
// unless it matches and is at most 300 s old.
func verifySlackInteraction(sink mirror.Sink, h http.Header, body []byte) *apierror.Error {
	if sink.SigningSecret == "" {
		return apierror.New(http.StatusUnauthorized, apierror.SignatureInvalid,
			"this Slack app destination has no signing secret yet: its owner must paste the app's signing secret (Basic Information > App Credentials) into the destination; nothing was changed")
	}
	err := sourceverify.Verify(sourceverify.Config{Scheme: sourceverify.SchemeSlack, Secret: sink.SigningSecret}, h, "", body, time.Now())
	if err == nil {
		return nil
	}
	msg := err.Error()
	var ve *sourceverify.Error
	if errors.As(err, &ve) && ve.Reason == sourceverify.ReasonConfig {
		// The message speaks of a source; the cause is the owner's to fix, not Slack's.
		msg = "this Slack app destination's signing secret is not usable: its owner must paste the app's signing secret again"
	}
	return apierror.New(http.StatusUnauthorized, apierror.SignatureInvalid, msg+"; nothing was changed")
}
