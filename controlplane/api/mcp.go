package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	mcpauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/otelcol-svc/otelcol-svc/controlplane/service"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
)

// The MCP endpoint (/mcp, streamable HTTP) offers an agent the same operations as the
// API, under the same sign-in: every tool call runs as the user of the Bearer token and
// calls the same controlplane/service operations, so the rules are the API's (someone
// else's project is "not found"). Tools never return event payloads: the control plane never sees any, and
// a source test leaves the sample payload out of the envelope it shows.

const mcpInstructions = `otelcol-svc turns events into calls to your AI agent. Typical flow:
1. list_projects to find the project_id.
2. test_source with the source settings you plan and a sample payload, until warnings is empty.
3. create_source: it returns the ingest_url and an api_key (shown once; keep it). Post JSON to the
   ingest_url with Authorization: Bearer <api_key>. For a known sender (Alertmanager, Grafana, GitHub,
   Stripe, Sentry, PagerDuty, CloudEvents) set preset; for one that cannot send the key, set
   verification (the secret, password or URL token is shown once; rotate_source_secret replaces it).
4. console_recent_events and console_fields to see what arrived and which fields to rely on.
5. console_dry_run with the pipeline you plan, until it matches what it should; then set_pipeline
   to choose which events reach the agent (trigger, an OTTL condition over the record, e.g.
   event["_event_type"] == "opened") and where (agent_endpoint_url).
6. console_deliveries (state dead_lettered for the dead letters), console_delivery, console_trace
   and console_ledger to follow what was sent; console_replay (owner or admin) to send again.
   In incident mode (set_pipeline mode "incident"), console_incidents and console_incident show the
   incidents and console_incident_action (owner or admin) acknowledges, resolves, mutes or
   reinvestigates one.
7. The pipeline sends new records only: process_backlog with preview true counts what sending stored
   ones would cost (records, calls); without preview (owner or admin) it sends them.
The console_* tools do not fetch anything: each answers the request to make at the receiver
({method, url, headers, body for POST, expires_at, how}). Send it exactly as given, headers
included; the console token in it opens only that project, with your rights, for 10 minutes (call
the tool again for a fresh one). Records and bodies come from the receiver and never pass through
these tools. get_usage shows this month's accepted records.`

// mcpHandler serves MCP. It runs behind authed (a contract-shaped 401 without a valid
// token); RequireBearerToken then hands the user to the SDK, which passes it to every
// tool call as TokenInfo. The handler is stateless, so any control plane replica can
// answer any request.
func (s *Server) mcpHandler() http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "otelcol-svc", Title: "otelcol-svc control plane", Version: "1.0.0"},
		&mcp.ServerOptions{Instructions: mcpInstructions})

	addTool(srv, &mcp.Tool{Name: "list_projects",
		Description: "List the projects you are a member of, with your role in each (owner and admin may change a project, member may read it)."},
		s.toolListProjects)
	addTool(srv, &mcp.Tool{Name: "create_source",
		Description: "Create a push source (connector webhook): a URL that takes JSON posts (one object, an array of objects, or NDJSON) and stores each payload losslessly in an envelope with _event_type, _source, timestamp, text and labels. " +
			"A preset (alertmanager, grafana, github, stripe, sentry, pagerduty, cloudevents) reads that sender's bodies with its own event types, times and delivery ids; a verification lets senders that cannot send an API key prove themselves (signature, HTTP Basic or a token in the URL). " +
			"Returns ingest_url, ingest_key, an ingest-scoped api_key (shown only now: keep it, it is sent as Authorization: Bearer <api_key>), the verification's secret, password or URL token (shown only now: configure the sender with it) and a curl command. Stripe, Sentry, PagerDuty and Slack issue their own signing secret, Stripe, Sentry and PagerDuty only once they have the URL: leave verification.secret out, then give it with rotate_source_secret; until then (secret_set false) the source refuses every delivery. Needs owner or admin. Try the settings with test_source first.",
		InputSchema: mustSchema[createSourceArgs]("project_id", "name")},
		s.toolCreateSource)
	addTool(srv, &mcp.Tool{Name: "test_source",
		Description: "Check a source's settings (an unsaved source, or a saved one by source_id) against a sample payload, without storing anything: returns the envelope the source would store (without its payload member, which is the sample as sent) and warnings about fields the settings name that the payload lacks or holds in an unusable form (missing label fields, an unparseable time, unknown template fields). " +
			"With a preset, events lists every record the sample becomes (one per alert of an Alertmanager notification). With a verification and the sample's headers, verification says whether the receiver would accept the request (ok) or why not.",
		InputSchema: testSourceSchema()},
		s.toolTestSource)
	addTool(srv, &mcp.Tool{Name: "list_sources",
		Description: "List a project's push sources with their settings and ingest URLs (API keys are not shown again, only their first characters; verification secrets, passwords and URL tokens are never shown again: secret_set says one is stored)."},
		s.toolListSources)
	addTool(srv, &mcp.Tool{Name: "rotate_source_secret",
		Description: "Replace the secret of a source's verification (its signing secret, Basic password or URL token): generated for github, hmac, standard_webhooks, basic and url_token, or the one you give (required for stripe, sentry, pagerduty and slack, whose secret the sender issues). The answer shows the new one once (and, for url_token, the new ingest_url); the old one stops working within a second, so update the sender right away. Needs owner or admin."},
		s.toolRotateSourceSecret)
	addTool(srv, &mcp.Tool{Name: "delete_source",
		Description: "Delete a push source: its ingest URL and API key stop working within a second. Needs owner or admin."},
		s.toolDeleteSource)
	addTool(srv, &mcp.Tool{Name: "get_pipeline",
		Description: "Show a project's pipeline: mode (legacy, window or incident), trigger, transforms, agent_endpoint_url, window settings, batch_size, guardrails, and incident mode's fingerprint, resolve_when, group_wait, group_interval, resolve_after and reopen_within (with their defaults in incident mode)."},
		s.toolGetPipeline)
	addTool(srv, &mcp.Tool{Name: "set_pipeline",
		Description: "Change a project's pipeline. Fields you leave out keep their current value; send \"\" or [] to clear one. mode chooses legacy, window or incident mode (incident: fingerprint, resolve_when and the durations group_wait, group_interval, resolve_after, reopen_within, written as Go durations such as 30s or 5m). Expressions are OTTL over the record (event[\"field\"][\"nested\"], or bare lowercase paths such as body, attributes[\"k\"], _event_type via event[\"_event_type\"]); an invalid one is refused with the field and the parser's line:column, and nothing changes. The answer's warnings name fields the project's recent records never had (a likely misspelling, with the nearest field) and number fields compared with strings: the pipeline is saved, but such a trigger never matches. Needs owner or admin."},
		s.toolSetPipeline)
	addTool(srv, &mcp.Tool{Name: "get_console_token",
		Description: "Get a token (valid 10 minutes) for the receiver's console API, to check that events arrived: GET events_url (recent records, newest first; add ?source_id=<id> for one source's) or fields_url (which fields arrive and how often, to choose a reliable key field) with Authorization: Bearer <token>. Events are read from the receiver, never through these tools."},
		s.toolConsoleToken)
	addTool(srv, &mcp.Tool{Name: "get_usage",
		Description: "Show this month's accepted records (the free tier's count): without project_id, your account's (the projects you own): events, limit, remaining, per project, per day, and the 80%/100% notices; with project_id, that project's events and days with its owner's limit (any member may ask). An unlimited account shows unlimited: true with limit and remaining null."},
		s.toolGetUsage)
	s.addConsoleTools(srv)
	s.addBacklogTool(srv)
	s.addAuditTool(srv)
	s.addInviteTools(srv)
	srv.AddReceivingMiddleware(s.auditTools)

	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Stateless:    true,
		JSONResponse: true,
		// The localhost protection guards servers that trust whoever can reach them
		// (DNS rebinding from a browser). Every request here needs a Bearer token a
		// browser page cannot have, and the protection would refuse a reverse proxy on
		// the same machine that keeps the public Host header.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        maxBody,
		Logger:                     s.Logger,
	})
	verify := func(ctx context.Context, token string, r *http.Request) (*mcpauth.TokenInfo, error) {
		u, ok := r.Context().Value(userKey{}).(store.User)
		if ok && viaAccessToken(r) {
			// authed has just checked it against the database; a revoked token fails
			// there on its next request. A short expiry keeps the SDK from caching more.
			return &mcpauth.TokenInfo{UserID: u.ID, Expiration: time.Now().Add(time.Minute),
				Extra: map[string]any{credentialExtra: currentCredential(r.Context()), addrExtra: s.clientAddr(r)}}, nil
		}
		claims, err := s.Tokens.Parse(token)
		if !ok || err != nil || claims.Subject != u.ID {
			return nil, mcpauth.ErrInvalidToken
		}
		// authed has checked the token's login generation and named it as the credential.
		return &mcpauth.TokenInfo{UserID: u.ID, Expiration: claims.ExpiresAt.Time,
			Extra: map[string]any{credentialExtra: currentCredential(r.Context()), addrExtra: s.clientAddr(r)}}, nil
	}
	return mcpauth.RequireBearerToken(verify, nil)(h)
}

// addTool registers a tool with portable schemas: the SDK would infer them with nullable
// unions (`"type": ["null", "string"]` for a pointer field, ["null", "array"] for a
// slice, ["null", "object"] for a map), which several MCP clients and model APIs refuse
// or warn about (the Inspector's --strict among them). The pointers stay in the Go types,
// where they tell "left out" from "cleared"; the schema says only what a client should
// send. The SDK validates each answer against the output schema, so a handler answers an
// empty list or object, never a nil one (which would be encoded as null).
func addTool[In, Out any](srv *mcp.Server, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) {
	if t.InputSchema == nil {
		t.InputSchema = mustSchema[In]()
	}
	if t.OutputSchema == nil {
		t.OutputSchema = mustSchema[Out]()
	}
	// A personal access token's limits (some projects, read-only) hold for every tool.
	mcp.AddTool(srv, t, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		return h(service.WithLimits(ctx, toolCredential(req).Limits), req, in)
	})
}

// portable collapses every nullable union into its one non-null type, throughout the
// schema. jsonschema-go has no option for it (written by hand for that reason).
func portable(sc *jsonschema.Schema) *jsonschema.Schema {
	if sc == nil {
		return nil
	}
	if len(sc.Types) == 2 && slices.Contains(sc.Types, "null") {
		for _, t := range sc.Types {
			if t != "null" {
				sc.Type, sc.Types = t, nil
			}
		}
	}
	for _, sub := range sc.Properties {
		portable(sub)
	}
	for _, sub := range sc.Defs {
		portable(sub)
	}
	for _, sub := range sc.PatternProperties {
		portable(sub)
	}
	for _, list := range [][]*jsonschema.Schema{sc.AllOf, sc.AnyOf, sc.OneOf, sc.PrefixItems} {
		for _, sub := range list {
			portable(sub)
		}
	}
	portable(sc.Items)
	portable(sc.AdditionalProperties)
	return sc
}

// mustSchema infers a tool's input schema, portable, and marks fields required that the
// Go type leaves optional (omitempty for the embedded SourceSpec).
func mustSchema[T any](required ...string) *jsonschema.Schema {
	sc, err := jsonschema.For[T](nil)
	if err != nil {
		panic(err)
	}
	portable(sc)
	for _, r := range required {
		if !slices.Contains(sc.Required, r) {
			sc.Required = append(sc.Required, r)
		}
	}
	return sc
}

// testSourceSchema is test_source's input schema. The payload is kept as its JSON bytes
// (json.RawMessage, which the schema inference would describe as a byte array); agents
// must see it as the object it is.
func testSourceSchema() *jsonschema.Schema {
	sc := mustSchema[testSourceArgs]("project_id", "payload")
	// One type: agents see an object, which is what nearly every sender posts (the REST
	// API also takes a string holding the body byte for byte, or an array).
	sc.Properties["payload"] = &jsonschema.Schema{Type: "object",
		Description: "a sample payload: one JSON object as your system would post it; with a verification, the bytes of this object as you send them are what the signature is checked against"}
	return sc
}

// credentialExtra is the TokenInfo.Extra entry holding the service.Credential a tool
// call was authenticated with.
const credentialExtra = "credential"

// toolCredential is the credential of a tool call, which console tokens it mints name.
func toolCredential(req *mcp.CallToolRequest) service.Credential {
	if req.Extra == nil || req.Extra.TokenInfo == nil {
		return service.Credential{}
	}
	c, _ := req.Extra.TokenInfo.Extra[credentialExtra].(service.Credential)
	return c
}

// toolUser returns the tool call's user, once the call names a project: the service's
// operations then run as that user, and their errors become tool errors (toolError).
func toolUser(req *mcp.CallToolRequest, projectID string) (string, error) {
	userID := ""
	if req.Extra != nil && req.Extra.TokenInfo != nil {
		userID = req.Extra.TokenInfo.UserID
	}
	if userID == "" {
		return "", errors.New("invalid_token: sign in: send Authorization: Bearer <a personal access token from /api/v1/tokens, or a login token>")
	}
	if strings.TrimSpace(projectID) == "" {
		return "", errors.New("invalid_body: project_id is required; list_projects shows yours")
	}
	return userID, nil
}

// toolError maps an operation's error as answer does for the API.
func (s *Server) toolError(err error, what string) error {
	var ae *apierror.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae):
		return fmt.Errorf("%s: %s", ae.Code, ae.Message)
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("%s: %s not found", apierror.NotFound, what)
	case errors.Is(err, store.ErrConflict):
		return fmt.Errorf("%s: %s already exists", apierror.Conflict, what)
	default:
		s.Logger.Error("MCP tool failed", "error", err)
		return fmt.Errorf("%s: something went wrong on our side; try again", apierror.Internal)
	}
}

// --- tools ---------------------------------------------------------------------------

type projectIn struct {
	ProjectID string `json:"project_id" jsonschema:"the project's id (p_...); list_projects shows yours"`
}

type projectItem struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Role string `json:"role" jsonschema:"your role: owner, admin or member"`
}

type projectsOut struct {
	Projects []projectItem `json:"projects"`
}

func (s *Server) toolListProjects(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, projectsOut, error) {
	out := projectsOut{Projects: []projectItem{}}
	if req.Extra == nil || req.Extra.TokenInfo == nil {
		return nil, out, errors.New("invalid_token: sign in first")
	}
	ps, roles, err := s.Svc.Projects(ctx, req.Extra.TokenInfo.UserID)
	for i, p := range ps {
		out.Projects = append(out.Projects, projectItem{ID: p.ID, Name: p.Name, Role: roles[i]})
	}
	return nil, out, s.toolError(err, "project")
}

type createSourceArgs struct {
	ProjectID string `json:"project_id" jsonschema:"the project's id (p_...); list_projects shows yours"`
	service.SourceSpec
}

type createSourceOut struct {
	service.SourceView
	Curl string `json:"curl" jsonschema:"a command that posts a sample event to the source"`
}

func (s *Server) toolCreateSource(ctx context.Context, req *mcp.CallToolRequest, in createSourceArgs) (*mcp.CallToolResult, createSourceOut, error) {
	var out createSourceOut
	src, e := in.SourceSpec.Validate("", true)
	if e != nil {
		return nil, out, s.toolError(e, "source")
	}
	userID, err := toolUser(req, in.ProjectID)
	if err != nil {
		return nil, out, err
	}
	if out.SourceView, err = s.Svc.CreateSource(ctx, userID, in.ProjectID, src); err != nil {
		return nil, createSourceOut{}, s.toolError(err, "project")
	}
	out.Curl = fmt.Sprintf(`curl -sS -X POST '%s' -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' -d '{"hello": "world"}'`,
		out.IngestURL, out.APIKey)
	return nil, out, nil
}

type testSourceArgs struct {
	ProjectID string `json:"project_id" jsonschema:"the project's id (p_...)"`
	// Payload stays JSON bytes, never Go values, so numbers keep every digit (and a
	// signature its bytes); its schema is set in testSourceSchema.
	service.SourceTestInput
}

type testSourceEvent struct {
	Envelope  map[string]any `json:"envelope" jsonschema:"the record, without its payload member"`
	EventType string         `json:"event_type" jsonschema:"the record's _event_type"`
	Warnings  []string       `json:"warnings" jsonschema:"what to fix for this record; empty when the mapping is complete"`
}

type testSourceOut struct {
	Envelope     map[string]any              `json:"envelope" jsonschema:"the record the source would store for the first event, without its payload member (the sample as sent)"`
	EventType    string                      `json:"event_type" jsonschema:"the record's _event_type"`
	Warnings     []string                    `json:"warnings" jsonschema:"what to fix in the settings or the payload; empty when the mapping is complete"`
	Events       []testSourceEvent           `json:"events" jsonschema:"every record the sample becomes (a preset may read several, e.g. one per alert), without payloads"`
	Verification *service.VerificationResult `json:"verification,omitempty" jsonschema:"whether the receiver would accept the sample request (when the source has a verification and headers or url_token are given)"`
}

// envelopeWithoutPayload decodes a record for a tool's answer, numbers as sent, without
// its payload (the sample the agent sent); {} for none.
func envelopeWithoutPayload(rec json.RawMessage) (map[string]any, error) {
	out := map[string]any{}
	if len(rec) == 0 || string(rec) == "null" {
		return out, nil
	}
	dec := json.NewDecoder(bytes.NewReader(rec))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	delete(out, "payload")
	return out, nil
}

func (s *Server) toolTestSource(ctx context.Context, req *mcp.CallToolRequest, in testSourceArgs) (*mcp.CallToolResult, testSourceOut, error) {
	var out testSourceOut
	// The SDK validates arguments by decoding them into map[string]any and encoding them
	// again, which turns every number into a float64: 1234567890123456789 would come back
	// as 1234567890123456800. The payload is read from the arguments as they were sent,
	// so the preview shows exactly what ingest would store.
	var sent map[string]json.RawMessage
	if req.Params != nil && json.Unmarshal(req.Params.Arguments, &sent) == nil && sent["payload"] != nil {
		in.Payload = sent["payload"]
	}
	userID, err := toolUser(req, in.ProjectID)
	if err != nil {
		return nil, out, err
	}
	res, err := s.Svc.TestSource(ctx, userID, in.ProjectID, in.SourceTestInput)
	if err != nil {
		return nil, out, s.toolError(err, "project")
	}
	if out.Envelope, err = envelopeWithoutPayload(res.Envelope); err != nil {
		return nil, out, s.toolError(err, "source")
	}
	out.EventType, out.Warnings, out.Verification = res.EventType, res.Warnings, res.Verification
	if out.Warnings == nil {
		out.Warnings = []string{}
	}
	out.Events = make([]testSourceEvent, 0, len(res.Events))
	for _, ev := range res.Events {
		env, err := envelopeWithoutPayload(ev.Envelope)
		if err != nil {
			return nil, testSourceOut{}, s.toolError(err, "source")
		}
		out.Events = append(out.Events, testSourceEvent{Envelope: env, EventType: ev.EventType, Warnings: ev.Warnings})
	}
	return nil, out, nil
}

type rotateSourceSecretArgs struct {
	ProjectID string `json:"project_id" jsonschema:"the project's id (p_...)"`
	SourceID  string `json:"source_id" jsonschema:"the source whose verification secret to replace (src_...); list_sources shows them"`
	Secret    string `json:"secret,omitempty" jsonschema:"the new secret, required for stripe, sentry, pagerduty and slack (the sender issues it: paste it); leave it out for the other schemes to get a generated one"`
}

func (s *Server) toolRotateSourceSecret(ctx context.Context, req *mcp.CallToolRequest, in rotateSourceSecretArgs) (*mcp.CallToolResult, service.SourceView, error) {
	userID, err := toolUser(req, in.ProjectID)
	if err != nil {
		return nil, service.SourceView{}, err
	}
	v, err := s.Svc.RotateSourceSecret(ctx, userID, in.ProjectID, in.SourceID, in.Secret)
	if err != nil {
		return nil, service.SourceView{}, s.toolError(err, "project")
	}
	return nil, v, nil
}

type sourcesOut struct {
	Sources []service.SourceView `json:"sources"`
}

func (s *Server) toolListSources(ctx context.Context, req *mcp.CallToolRequest, in projectIn) (*mcp.CallToolResult, sourcesOut, error) {
	var out sourcesOut
	userID, err := toolUser(req, in.ProjectID)
	if err != nil {
		return nil, out, err
	}
	if out.Sources, err = s.Svc.Sources(ctx, userID, in.ProjectID); err != nil {
		return nil, sourcesOut{}, s.toolError(err, "project")
	}
	if out.Sources == nil {
		out.Sources = []service.SourceView{}
	}
	return nil, out, nil
}

type deleteSourceArgs struct {
	ProjectID string `json:"project_id" jsonschema:"the project's id (p_...)"`
	SourceID  string `json:"source_id" jsonschema:"the source to delete (src_...); list_sources shows them"`
}

type deleteSourceOut struct {
	Deleted string `json:"deleted" jsonschema:"the id of the deleted source"`
}

func (s *Server) toolDeleteSource(ctx context.Context, req *mcp.CallToolRequest, in deleteSourceArgs) (*mcp.CallToolResult, deleteSourceOut, error) {
	userID, err := toolUser(req, in.ProjectID)
	if err != nil {
		return nil, deleteSourceOut{}, err
	}
	if err := s.Svc.DeleteSource(ctx, userID, in.ProjectID, in.SourceID); err != nil {
		return nil, deleteSourceOut{}, s.toolError(err, "project")
	}
	return nil, deleteSourceOut{Deleted: in.SourceID}, nil
}

// mcpPipeline is a pipeline as the tools show it to a member of role: the API's fields
// without the signing secret, which an agent in a conversation has no use for.
func mcpPipeline(st service.PipelineState) map[string]any {
	out := pipelineJSON(st)
	delete(out, "signing_secret")
	return out
}

func (s *Server) toolGetPipeline(ctx context.Context, req *mcp.CallToolRequest, in projectIn) (*mcp.CallToolResult, map[string]any, error) {
	userID, err := toolUser(req, in.ProjectID)
	if err != nil {
		return nil, nil, err
	}
	st, err := s.Svc.GetPipeline(ctx, userID, in.ProjectID)
	if err != nil {
		return nil, nil, s.toolError(err, "project")
	}
	return nil, mcpPipeline(st), nil
}

type setPipelineIn struct {
	ProjectID             string    `json:"project_id" jsonschema:"the project's id (p_...)"`
	Trigger               *string   `json:"trigger,omitempty" jsonschema:"OTTL condition selecting the records that reach the agent, e.g. event[\"_event_type\"] == \"opened\"; empty matches every record"`
	Transforms            *[]string `json:"transforms,omitempty" jsonschema:"OTTL statements applied to each record, e.g. set(event[\"service\"], resource_attributes[\"service.name\"])"`
	AgentEndpointURL      *string   `json:"agent_endpoint_url,omitempty" jsonschema:"the agent's HTTPS endpoint; records are POSTed there (nothing is consumed while it is empty)"`
	WindowEnabled         *bool     `json:"window_enabled,omitempty" jsonschema:"window mode: the agent gets {trigger, window} with the trigger's recent group context instead of batches"`
	ContextFilter         *string   `json:"context_filter,omitempty" jsonschema:"window mode: OTTL condition selecting the records kept as context"`
	WindowDurationSeconds *int      `json:"window_duration_seconds,omitempty" jsonschema:"window mode: how long context is kept (default 300)"`
	GroupKey              *string   `json:"group_key,omitempty" jsonschema:"window mode: OTTL path grouping records, e.g. traceId or event[\"labels\"][\"repo\"]"`
	BatchSize             *int      `json:"batch_size,omitempty" jsonschema:"legacy mode: records per agent call (default 10)"`
	CooldownSeconds       *int      `json:"cooldown_seconds,omitempty" jsonschema:"after a call for a dedup key, triggers with the same key are not sent for this many seconds (0 off, at most 86400); the next call says how many were suppressed"`
	DedupKey              *string   `json:"dedup_key,omitempty" jsonschema:"OTTL value expression naming what the cooldown is per, e.g. resource_attributes[\"k8s.pod.name\"]; empty: the group key in window mode, the whole project in legacy mode"`
	MaxCallsPerMinute     *int      `json:"max_calls_per_minute,omitempty" jsonschema:"at most this many agent calls a minute for the project (0 no limit); the rest are counted as suppressed"`
	MaxCallsPerDay        *int      `json:"max_calls_per_day,omitempty" jsonschema:"at most this many agent calls a day for the project (0 no limit)"`
	WindowMaxBytes        *int      `json:"window_max_bytes,omitempty" jsonschema:"window mode: the window sent with a trigger is cut to this many bytes of JSON, newest events kept (0 is the default 400000, else 8192 to 10000000)"`
	WindowMaxEvents       *int      `json:"window_max_events,omitempty" jsonschema:"window mode: the window sent with a trigger holds at most this many events, newest kept (0 is the default 5000, at most 50000)"`
	Mode                  *string   `json:"mode,omitempty" jsonschema:"legacy (batches of triggered records), window (each trigger with its group's recent context) or incident (triggered records open and join incidents per fingerprint; the agent is called when one opens, as it grows and when it resolves); left out, window_enabled decides as before"`
	Fingerprint           *string   `json:"fingerprint,omitempty" jsonschema:"incident mode: OTTL value naming the incident a triggered record belongs to, e.g. event[\"labels\"][\"alertname\"]; empty: one incident per project"`
	ResolveWhen           *string   `json:"resolve_when,omitempty" jsonschema:"incident mode: OTTL condition; a record matching it resolves the open incident of its fingerprint (it never opens one), e.g. event[\"status\"] == \"resolved\""`
	GroupWait             *string   `json:"group_wait,omitempty" jsonschema:"incident mode: how long the opening call waits for more records after an incident opens, a Go duration such as 30s (default 30s, 0s to 1h)"`
	GroupInterval         *string   `json:"group_interval,omitempty" jsonschema:"incident mode: at most one update call per incident in this long, and only when new records joined it (default 5m, 1s to 24h)"`
	ResolveAfter          *string   `json:"resolve_after,omitempty" jsonschema:"incident mode: an incident no record joined for this long resolves (default 30m, 1s to 7 days as 168h)"`
	ReopenWithin          *string   `json:"reopen_within,omitempty" jsonschema:"incident mode: a record this soon after its incident resolved reopens that incident instead of opening a new one (default 0s: off, at most 168h)"`
}

func (s *Server) toolSetPipeline(ctx context.Context, req *mcp.CallToolRequest, in setPipelineIn) (*mcp.CallToolResult, map[string]any, error) {
	u := service.PipelineUpdate{Trigger: in.Trigger, Transforms: in.Transforms, AgentEndpointURL: in.AgentEndpointURL,
		WindowEnabled: in.WindowEnabled, ContextFilter: in.ContextFilter, WindowDurationSeconds: in.WindowDurationSeconds,
		GroupKey: in.GroupKey, BatchSize: in.BatchSize, CooldownSeconds: in.CooldownSeconds, DedupKey: in.DedupKey,
		MaxCallsPerMinute: in.MaxCallsPerMinute, MaxCallsPerDay: in.MaxCallsPerDay,
		WindowMaxBytes: in.WindowMaxBytes, WindowMaxEvents: in.WindowMaxEvents,
		Mode: in.Mode, Fingerprint: in.Fingerprint, ResolveWhen: in.ResolveWhen, GroupWait: in.GroupWait,
		GroupInterval: in.GroupInterval, ResolveAfter: in.ResolveAfter, ReopenWithin: in.ReopenWithin}
	userID, err := toolUser(req, in.ProjectID)
	if err != nil {
		return nil, nil, err
	}
	st, err := s.Svc.UpdatePipeline(ctx, userID, in.ProjectID, u)
	if err != nil {
		return nil, nil, s.toolError(err, "project")
	}
	// Warnings (a field the project's records never had) are the agent's to read too.
	out := mcpPipeline(st)
	out["warnings"] = service.Warnings(st.Warnings)
	return nil, out, nil
}

type consoleTokenOut struct {
	service.ConsoleToken
	EventsURL string `json:"events_url" jsonschema:"GET this with Authorization: Bearer <token> to list the project's recent records (?source_id=<id> for one source, ?limit=N)"`
	FieldsURL string `json:"fields_url" jsonschema:"GET this with Authorization: Bearer <token> to see which fields recent records carry and how often"`
}

func (s *Server) toolConsoleToken(ctx context.Context, req *mcp.CallToolRequest, in projectIn) (*mcp.CallToolResult, consoleTokenOut, error) {
	var out consoleTokenOut
	userID, err := toolUser(req, in.ProjectID)
	if err != nil {
		return nil, out, err
	}
	if out.ConsoleToken, err = s.Svc.IssueConsoleToken(ctx, userID, in.ProjectID, toolCredential(req)); err != nil {
		return nil, out, s.toolError(err, "project")
	}
	consoleAPI := s.Svc.ReceiverURL + "/console/v1/projects/" + url.PathEscape(in.ProjectID)
	out.EventsURL, out.FieldsURL = consoleAPI+"/events", consoleAPI+"/fields"
	return nil, out, nil
}

type usageIn struct {
	ProjectID string `json:"project_id,omitempty" jsonschema:"a project's id (p_...) for that project's usage; leave out for your account's"`
}

func (s *Server) toolGetUsage(ctx context.Context, req *mcp.CallToolRequest, in usageIn) (*mcp.CallToolResult, map[string]any, error) {
	if strings.TrimSpace(in.ProjectID) != "" {
		userID, err := toolUser(req, in.ProjectID)
		if err != nil {
			return nil, nil, err
		}
		u, err := s.Svc.ProjectUsage(ctx, userID, in.ProjectID)
		if err != nil {
			return nil, nil, s.toolError(err, "project")
		}
		return nil, projectUsageJSON(u), nil
	}
	if req.Extra == nil || req.Extra.TokenInfo == nil || req.Extra.TokenInfo.UserID == "" {
		return nil, nil, errors.New("invalid_token: sign in first")
	}
	u, err := s.Svc.AccountUsage(ctx, req.Extra.TokenInfo.UserID)
	if err != nil {
		return nil, nil, s.toolError(err, "account")
	}
	return nil, accountUsageJSON(u), nil
}
