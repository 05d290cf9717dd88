package api

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/otelcol-svc/otelcol-svc/controlplane/service"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
)

// addrExtra is the TokenInfo.Extra entry holding the client address of a tool call, for
// its audit record.
const addrExtra = "client_addr"

// mcpAuditActions are the tools that change a project or hand out reads of its data, as
// auditActions are the routes: the action and the argument naming its target. The
// console tools each mint a console token that reads (or, for replay, changes) data at
// the receiver: the token is what the control plane sees, so that is recorded.
var mcpAuditActions = map[string]auditAction{
	"create_source":           {action: "source.create"},
	"invite_member":           {action: "member.add"},
	"rotate_source_secret":    {action: "source.secret.rotate", target: "source_id"},
	"delete_source":           {action: "source.delete", target: "source_id"},
	"set_pipeline":            {action: "pipeline.update"},
	"process_backlog":         {action: "backlog.start"},
	"get_console_token":       {action: "console.token", read: true},
	"console_recent_events":   {action: "console.token", read: true},
	"console_fields":          {action: "console.token", read: true},
	"console_dry_run":         {action: "console.token", read: true},
	"console_deliveries":      {action: "console.token", read: true},
	"console_delivery":        {action: "console.token", read: true},
	"console_ledger":          {action: "console.token", read: true},
	"console_trace":           {action: "console.token", read: true},
	"console_replay":          {action: "console.token", read: true},
	"console_incidents":       {action: "console.token", read: true},
	"console_incident":        {action: "console.token", read: true},
	"console_incident_action": {action: "console.token", read: true},
}

// toolActor is who a tool call acts as.
func toolActor(req *mcp.CallToolRequest) service.Actor {
	var a service.Actor
	if req == nil || req.Extra == nil || req.Extra.TokenInfo == nil {
		return a
	}
	a.UserID = req.Extra.TokenInfo.UserID
	c := toolCredential(req)
	a.CredID, a.CredKind = c.ID, service.CredentialKind(c.ID)
	a.Addr, _ = req.Extra.TokenInfo.Extra[addrExtra].(string)
	return a
}

// auditTools records the tool calls of mcpAuditActions: the record rides in the call's
// context to the transaction that makes the change or mints the console token
// (service.Audited), so a record that cannot be written refuses the call. Project and
// target come from the call's arguments.
func (s *Server) auditTools(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		call, ok := req.(*mcp.CallToolRequest)
		if !ok || method != "tools/call" || call.Params == nil {
			return next(ctx, method, req)
		}
		a, ok := mcpAuditActions[call.Params.Name]
		if !ok {
			return next(ctx, method, req)
		}
		var args map[string]any
		_ = json.Unmarshal(call.Params.Arguments, &args) // a malformed call fails in the tool
		project, _ := args["project_id"].(string)
		target := ""
		if a.target != "" {
			target, _ = args[a.target].(string)
		} else if a.read {
			target = call.Params.Name
		}
		return next(service.Audited(ctx, toolActor(call), project, a.action, target), method, req)
	}
}

type auditListIn struct {
	ProjectID string `json:"project_id" jsonschema:"the project's id (p_...); list_projects shows yours"`
	Limit     int    `json:"limit,omitempty" jsonschema:"how many records, newest first (1 to 500, default 100)"`
	Before    string `json:"before,omitempty" jsonschema:"next_before of the previous answer, for the page after it"`
	Action    string `json:"action,omitempty" jsonschema:"only this action, or actions starting with it (sink matches sink.create, sink.update, sink.delete)"`
}

type auditListOut struct {
	Events     []auditEventJSON `json:"events"`
	NextBefore string           `json:"next_before,omitempty" jsonschema:"give as before for the next (older) page; absent on the last"`
}

func (s *Server) addAuditTool(srv *mcp.Server) {
	addTool(srv, &mcp.Tool{Name: "audit_list",
		Description: "List a project's audit log, newest first: who (actor), with which credential (session, login token, personal access token, OAuth grant, console token), did what (action, such as pipeline.update, sink.secret change, member.remove, deadletter.replay, console.token), to what (target), when (at), from which address (from), and what changed (changes: each field's from and to; secrets are never shown, only that they changed). Needs owner or admin.",
		InputSchema: limitSchema[auditListIn](store.MaxAuditLimit, "project_id"), OutputSchema: auditListSchema()},
		s.toolAuditList)
}

// auditListSchema is audit_list's output schema: changes are an object of fields (kept
// as their JSON bytes, which the inference would describe as a byte array).
func auditListSchema() *jsonschema.Schema {
	sc := mustSchema[auditListOut]()
	sc.Properties["events"].Items.Properties["changes"] = &jsonschema.Schema{Type: "object",
		Description: `the fields that changed, each {"from", "to"} (from absent: created; to absent: removed); secrets only as "[redacted]"`}
	return sc
}

func (s *Server) toolAuditList(ctx context.Context, req *mcp.CallToolRequest, in auditListIn) (*mcp.CallToolResult, auditListOut, error) {
	out := auditListOut{Events: []auditEventJSON{}}
	userID, err := toolUser(req, in.ProjectID)
	if err != nil {
		return nil, out, err
	}
	v := url.Values{}
	if in.Limit != 0 {
		v.Set("limit", strconv.Itoa(in.Limit))
	}
	v.Set("before", in.Before)
	v.Set("action", in.Action)
	q, e := parseAuditQuery(v)
	if e != nil {
		return nil, out, s.toolError(e, "project")
	}
	evs, err := s.Svc.AuditLog(ctx, userID, in.ProjectID, q.AuditQuery)
	if err != nil {
		return nil, out, s.toolError(err, "project")
	}
	for _, ev := range evs {
		j := auditJSON(ev)
		if j.Credential == nil {
			j.Credential = &auditCredJSON{} // an object always: the schema has no null
		}
		out.Events = append(out.Events, j)
	}
	if len(evs) == q.Limit {
		out.NextBefore = cursorOf(evs[len(evs)-1])
	}
	return nil, out, nil
}
