package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/otelcol-svc/otelcol-svc/controlplane/service"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/deliverylog"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
)

// The console tools let an agent work a project as a person does in the dashboard
// (recent events, fields, dry run, deliveries and dead letters, trace, ledger, replay)
// without the control plane ever seeing a payload: like the dashboard, the control plane
// only issues a console token (10 minutes, the caller's membership) and says which
// request to make at the receiver, and the agent makes it. The receiver checks the token
// as it does the dashboard's, so the agent has exactly its user's rights.

type consoleRequestOut struct {
	Method    string            `json:"method" jsonschema:"the HTTP method: GET, or POST with body"`
	URL       string            `json:"url" jsonschema:"the receiver's console API URL to call, query included"`
	Headers   map[string]string `json:"headers" jsonschema:"the headers to send, as they are: Authorization carries a console token for this project"`
	Body      json.RawMessage   `json:"body,omitempty"`
	ExpiresAt string            `json:"expires_at" jsonschema:"when the token stops working (RFC 3339); call the tool again for a new request then"`
	How       string            `json:"how" jsonschema:"how to send it and what it answers"`
}

// consoleRequestSchema is the console tools' output schema: the body is kept as its JSON
// bytes (which the inference would describe as a byte array), and it is an object.
func consoleRequestSchema() *jsonschema.Schema {
	sc := mustSchema[consoleRequestOut]()
	sc.Properties["body"] = &jsonschema.Schema{Type: "object",
		Description: "for POST: the exact JSON body to send (Content-Type: application/json)"}
	return sc
}

// limitSchema is a tool's input schema with its limit's bounds, so that a client that
// reads schemas knows them before asking.
func limitSchema[In any](maxLimit int, required ...string) *jsonschema.Schema {
	sc := mustSchema[In](required...)
	one, most := 1.0, float64(maxLimit)
	sc.Properties["limit"].Minimum, sc.Properties["limit"].Maximum = &one, &most
	return sc
}

// dryRunSchema is console_dry_run's input schema: the pipeline is an object with
// set_pipeline's fields, not the byte array its Go type would be described as.
func dryRunSchema() *jsonschema.Schema {
	sc := limitSchema[dryRunIn](maxDryRunLimit, "pipeline")
	pipeline := mustSchema[setPipelineIn]()
	delete(pipeline.Properties, "project_id")
	pipeline.Required = nil
	pipeline.Description = "the pipeline to try, saved or not, with set_pipeline's fields (trigger, transforms, agent_endpoint_url, window_enabled, context_filter, group_key, ...)"
	sc.Properties["pipeline"] = pipeline
	return sc
}

// withEnum lists a property's values in the schema, so an agent picks one of them.
func withEnum(sc *jsonschema.Schema, property string, values []string) *jsonschema.Schema {
	for _, v := range values {
		sc.Properties[property].Enum = append(sc.Properties[property].Enum, v)
	}
	return sc
}

func (s *Server) addConsoleTools(srv *mcp.Server) {
	out := consoleRequestSchema()
	const answers = " Answers the console request to make (method, url, headers with a console token valid 10 minutes, body for POST): make it yourself; the control plane never relays payloads."
	addTool(srv, &mcp.Tool{Name: "console_recent_events",
		Description: "See a project's newest records as stored (what triggers are evaluated over), newest first; optionally only one push source's." + answers,
		InputSchema: limitSchema[recentEventsIn](maxEventsLimit, "project_id"), OutputSchema: out},
		consoleTool[recentEventsIn](s))
	addTool(srv, &mcp.Tool{Name: "console_fields",
		Description: "See which field paths a project's newest records carry, how often and with which JSON types, to choose a trigger, group_key or dedup_key that holds. " +
			"Write expressions with each field's ottl (attributes[\"http.method\"], event[\"_event_type\"]), never its path: path joins keys with dots, so a key holding dots cannot be told from nested objects." + answers,
		InputSchema: limitSchema[fieldsIn](maxFieldsLimit, "project_id"), OutputSchema: out},
		consoleTool[fieldsIn](s))
	addTool(srv, &mcp.Tool{Name: "console_dry_run",
		Description: "Try a pipeline (saved or not) over the project's newest records: how many match the trigger, the matched records (as stored and as sent) and each body the agent would get, with nothing sent or stored. Any member may." + answers,
		InputSchema: dryRunSchema(), OutputSchema: out},
		consoleTool[dryRunIn](s))
	addTool(srv, &mcp.Tool{Name: "console_deliveries",
		Description: "List a project's deliveries (agent calls and destination deliveries, kept 7 days), newest first; state dead_lettered lists the dead letters." + answers,
		InputSchema: limitSchema[deliveriesIn](deliverylog.MaxLimit, "project_id"), OutputSchema: out},
		consoleTool[deliveriesIn](s))
	addTool(srv, &mcp.Tool{Name: "console_delivery",
		Description: "Show one delivery with its attempt log, the body sent and the other side's answer." + answers,
		InputSchema: mustSchema[deliveryIn]("project_id", "delivery_id"), OutputSchema: out},
		consoleTool[deliveryIn](s))
	addTool(srv, &mcp.Tool{Name: "console_ledger",
		Description: "Show a project's counts that add up: records received, dropped, sent to the agent, results, delivered, dead-lettered, pending." + answers,
		InputSchema: mustSchema[ledgerIn]("project_id"), OutputSchema: out},
		consoleTool[ledgerIn](s))
	addTool(srv, &mcp.Tool{Name: "console_trace",
		Description: "Follow a record (by seq) or an agent call (by request_id) through the agent call, its results and their deliveries." + answers,
		InputSchema: mustSchema[traceIn]("project_id"), OutputSchema: out},
		consoleTool[traceIn](s))
	addTool(srv, &mcp.Tool{Name: "console_replay",
		Description: "Send deliveries again, by ids or every dead letter (state dead_lettered, optionally of one kind, since a time); each becomes a new delivery naming the old one. Needs owner or admin." + answers,
		InputSchema: mustSchema[replayIn]("project_id"), OutputSchema: out},
		consoleTool[replayIn](s))
	addTool(srv, &mcp.Tool{Name: "console_incidents",
		Description: "List a project's incidents (incident mode: triggered records grouped per fingerprint), open and acknowledged ones first, then resolved ones; optionally only one status." + answers,
		InputSchema: withEnum(limitSchema[incidentsIn](maxIncidentsLimit, "project_id"), "status", incidentStatuses), OutputSchema: out},
		consoleTool[incidentsIn](s))
	addTool(srv, &mcp.Tool{Name: "console_incident",
		Description: "Show one incident with its counts, last agent result and timeline (events joining, agent calls and results, chat messages, who acknowledged, muted or resolved it)." + answers,
		InputSchema: mustSchema[incidentIn]("project_id", "incident_id"), OutputSchema: out},
		consoleTool[incidentIn](s))
	addTool(srv, &mcp.Tool{Name: "console_incident_action",
		Description: "Act on an incident as the dashboard's and Slack's buttons do: acknowledge, resolve, mute (an hour without update calls) or reinvestigate (the agent is called again). Needs owner or admin." + answers,
		InputSchema: withEnum(mustSchema[incidentActionIn]("project_id", "incident_id", "action"), "action", incidentActions), OutputSchema: out},
		consoleTool[incidentActionIn](s))
}

// consoleTool answers the console request a tool's arguments stand for, as the caller.
// Nothing is issued before the arguments and the caller's rights are checked.
func consoleTool[In consoleArgs](s *Server) mcp.ToolHandlerFor[In, consoleRequestOut] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, consoleRequestOut, error) {
		var out consoleRequestOut
		userID, err := toolUser(req, in.project())
		if err != nil {
			return nil, out, err
		}
		if !streams.ValidProjectID(in.project()) {
			return nil, out, errors.New("invalid_body: project_id must be a project's id (p_...), as list_projects shows it")
		}
		c, err := in.call()
		if err != nil {
			return nil, out, fmt.Errorf("invalid_body: %v", err)
		}
		// A read-only token would get an `ro` console token the receiver refuses for
		// this call: refused here, with the reason.
		if c.write && toolCredential(req).Limits.ReadOnly {
			return nil, out, s.toolError(service.ReadOnlyRefusal, "project")
		}
		if c.write {
			_, role, err := s.Svc.Project(ctx, userID, in.project())
			if err != nil {
				return nil, out, s.toolError(err, "project")
			}
			if role != store.RoleOwner && role != store.RoleAdmin {
				return nil, out, errors.New("forbidden: this needs the project's owner or an admin; you are a member, who may read it but not change it")
			}
		}
		ct, err := s.Svc.IssueConsoleToken(ctx, userID, in.project(), toolCredential(req))
		if err != nil {
			return nil, out, s.toolError(err, "project")
		}
		out = consoleRequestOut{Method: c.method, ExpiresAt: ct.ExpiresAt, How: c.how,
			URL:     ct.ReceiverURL + "/console/v1/projects/" + url.PathEscape(in.project()) + c.path,
			Headers: map[string]string{"Authorization": "Bearer " + ct.Token}}
		if len(c.query) > 0 {
			out.URL += "?" + c.query.Encode()
		}
		if c.body != nil {
			out.Body = c.body
			out.Headers["Content-Type"] = "application/json"
		}
		if c.write {
			out.Headers["Idempotency-Key"] = idempotencyKey()
		}
		return nil, out, nil
	}
}

// idempotencyKey names one write, so that the agent's retry of the same request (after a
// lost answer) does nothing twice.
func idempotencyKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
