package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/otelcol-svc/otelcol-svc/controlplane/service"
)

// Processing stored records: POST .../pipeline/backlog previews or starts it,
// GET shows the latest one. The bodies carry counts only, never a record.

// backlogBody is POST /api/v1/projects/{id}/pipeline/backlog.
type backlogBody struct {
	Since   *string `json:"since"`
	Last    *int    `json:"last"`
	Preview bool    `json:"preview"`
	// ExpectCalls is the number of calls the user agreed to (the dashboard sends the
	// preview's): a start whose range now makes another number is refused.
	ExpectCalls *int `json:"expect_calls"`
}

// backlogRequest turns a decoded body into the service's request, refusing a since that
// is not an RFC 3339 time and whatever BacklogRequest.Validate refuses.
func (b backlogBody) request(now time.Time) (service.BacklogRequest, error) {
	req := service.BacklogRequest{Last: b.Last, ExpectCalls: b.ExpectCalls}
	if b.Since != nil {
		t, err := time.Parse(time.RFC3339, strings.TrimSpace(*b.Since))
		if err != nil {
			return req, badBody(fmt.Sprintf(`"since" must be an RFC 3339 time such as %s, not %q`, now.UTC().Add(-time.Hour).Format(time.RFC3339), clip(*b.Since, 64)))
		}
		t = t.UTC()
		req.Since = &t
	}
	return req, req.Validate(now)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func rfc3339(t *time.Time) any {
	if t == nil || t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func backlogPreviewJSON(p service.BacklogPreview) map[string]any {
	return map[string]any{"preview": true, "records": p.Records, "matched": p.Matched, "calls": p.Calls,
		"first_seq": p.FirstSeq, "last_seq": p.LastSeq, "from": rfc3339(p.From), "to": rfc3339(p.To)}
}

func backlogViewJSON(v *service.BacklogView) any {
	if v == nil {
		return nil
	}
	out := map[string]any{"id": v.ID, "state": v.State, "records": v.Records, "matched": v.Matched, "calls": v.Calls,
		"first_seq": v.FirstSeq, "last_seq": v.LastSeq, "processed": v.Processed,
		"requested_at": rfc3339(&v.RequestedAt), "requested_by": v.RequestedBy, "updated_at": rfc3339(v.UpdatedAt)}
	if v.Error != "" {
		out["error"] = v.Error
	}
	return out
}

func (s *Server) postBacklog(w http.ResponseWriter, r *http.Request) {
	var b backlogBody
	if e := decode(r, &b); e != nil {
		fail(w, e)
		return
	}
	req, err := b.request(time.Now())
	if err != nil {
		s.answer(w, r, err, "project")
		return
	}
	if b.Preview {
		p, err := s.Svc.PreviewBacklog(r.Context(), currentUser(r).ID, r.PathValue("id"), req)
		s.respond(w, r, err, http.StatusOK, func() any { return backlogPreviewJSON(p) })
		return
	}
	v, err := s.Svc.StartBacklog(r.Context(), currentUser(r).ID, r.PathValue("id"), req)
	s.respond(w, r, err, http.StatusAccepted, func() any { return map[string]any{"backlog": backlogViewJSON(&v)} })
}

func (s *Server) getBacklog(w http.ResponseWriter, r *http.Request) {
	v, err := s.Svc.LatestBacklog(r.Context(), currentUser(r).ID, r.PathValue("id"))
	s.respond(w, r, err, http.StatusOK, func() any { return map[string]any{"backlog": backlogViewJSON(v)} })
}

// --- MCP -----------------------------------------------------------------------------

const processBacklogDescription = "Send records already stored in a project through its saved pipeline to its agent: a project's pipeline starts " +
	"from new records when it gets an agent URL, so older ones reach the agent only when asked for here. Give last (the last N " +
	"records, 1 to 10000) or since (an RFC 3339 time). With preview true (any member) nothing is sent: it answers records, " +
	"matched (records the trigger selects), calls (agent calls it would make), first_seq/last_seq and from/to. Without preview " +
	"(owner or admin) it starts: it sends exactly the calls a preview of the same range announces (pass expect_calls with the " +
	"number you were shown to refuse a start that would now make another), and answers the backlog with state queued; call " +
	"again with status true to follow it (queued, running, done, failed). Every call costs an agent run: preview first."

type processBacklogIn struct {
	ProjectID   string `json:"project_id" jsonschema:"the project's id (p_...); list_projects shows yours"`
	Last        *int   `json:"last,omitempty" jsonschema:"process the last N stored records (1 to 10000)"`
	Since       string `json:"since,omitempty" jsonschema:"process the records stored since this RFC 3339 time, e.g. 2026-11-26T10:00:00Z"`
	Preview     bool   `json:"preview,omitempty" jsonschema:"true: only count records and calls, send nothing"`
	ExpectCalls *int   `json:"expect_calls,omitempty" jsonschema:"the number of calls a preview showed; the start is refused if the range now makes another"`
	Status      bool   `json:"status,omitempty" jsonschema:"true: show the project's latest backlog and its progress instead (give neither last nor since)"`
}

func (s *Server) toolProcessBacklog(ctx context.Context, req *mcp.CallToolRequest, in processBacklogIn) (*mcp.CallToolResult, map[string]any, error) {
	userID, err := toolUser(req, in.ProjectID)
	if err != nil {
		return nil, nil, err
	}
	if in.Status {
		if in.Last != nil || in.Since != "" || in.Preview {
			return nil, nil, s.toolError(badBody("status shows the latest backlog: give neither last, since nor preview with it"), "project")
		}
		v, err := s.Svc.LatestBacklog(ctx, userID, in.ProjectID)
		if err != nil {
			return nil, nil, s.toolError(err, "project")
		}
		return nil, map[string]any{"backlog": backlogViewJSON(v)}, nil
	}
	b := backlogBody{Last: in.Last, Preview: in.Preview, ExpectCalls: in.ExpectCalls}
	if in.Since != "" {
		b.Since = &in.Since
	}
	r, err := b.request(time.Now())
	if err != nil {
		return nil, nil, s.toolError(err, "project")
	}
	if in.Preview {
		p, err := s.Svc.PreviewBacklog(ctx, userID, in.ProjectID, r)
		if err != nil {
			return nil, nil, s.toolError(err, "project")
		}
		return nil, backlogPreviewJSON(p), nil
	}
	v, err := s.Svc.StartBacklog(ctx, userID, in.ProjectID, r)
	if err != nil {
		return nil, nil, s.toolError(err, "project")
	}
	return nil, map[string]any{"backlog": backlogViewJSON(&v)}, nil
}

// addBacklogTool registers process_backlog on the MCP server.
func (s *Server) addBacklogTool(srv *mcp.Server) {
	addTool(srv, &mcp.Tool{Name: "process_backlog", Description: processBacklogDescription,
		InputSchema: mustSchema[processBacklogIn]("project_id")}, s.toolProcessBacklog)
}
