package api

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type inviteArgs struct {
	ProjectID string `json:"project_id" jsonschema:"the project"`
	Email     string `json:"email" jsonschema:"the address to invite"`
	Role      string `json:"role,omitempty" jsonschema:"admin or member (the default)"`
}

type invitationsArgs struct {
	ProjectID string `json:"project_id" jsonschema:"the project"`
}

// addInviteTools registers the member tools an agent setting up a team uses: invite by
// email and list what is pending. They call the rules POST .../members and
// GET .../invitations do.
func (s *Server) addInviteTools(srv *mcp.Server) {
	addTool(srv, &mcp.Tool{Name: "invite_member",
		Description: "Add someone to a project by email with a role (member, the default, or admin). An account that has confirmed its address becomes a member at once (member in the answer); any other address gets an invitation by email (invitation in the answer), valid 7 days, which makes them a member when they accept it. Needs owner or admin. Without email configured on the deployment, only existing accounts can be added.",
		InputSchema: mustSchema[inviteArgs]("project_id", "email")},
		s.toolInviteMember)
	addTool(srv, &mcp.Tool{Name: "list_invitations",
		Description: "List a project's pending invitations (email, role, when they expire). Needs owner or admin."},
		s.toolListInvitations)
}

func (s *Server) toolInviteMember(ctx context.Context, req *mcp.CallToolRequest, in inviteArgs) (*mcp.CallToolResult, map[string]any, error) {
	userID, err := toolUser(req, in.ProjectID)
	if err != nil {
		return nil, nil, err
	}
	if !s.Email.Enabled() {
		u, role, err := s.Svc.AddMember(ctx, userID, in.ProjectID, in.Email, in.Role)
		if err != nil {
			return nil, nil, s.toolError(err, "project")
		}
		return nil, map[string]any{"member": map[string]any{"user_id": u.ID, "email": u.Email, "role": role}}, nil
	}
	u, inv, err := s.Email.Invite(ctx, userID, in.ProjectID, in.Email, in.Role)
	if err != nil {
		return nil, nil, s.toolError(err, "project")
	}
	if inv != nil {
		return nil, map[string]any{"invitation": invitationJSON(*inv)}, nil
	}
	role := in.Role
	if role == "" {
		role = "member"
	}
	return nil, map[string]any{"member": map[string]any{"user_id": u.ID, "email": u.Email, "role": role}}, nil
}

func (s *Server) toolListInvitations(ctx context.Context, req *mcp.CallToolRequest, in invitationsArgs) (*mcp.CallToolResult, map[string]any, error) {
	userID, err := toolUser(req, in.ProjectID)
	if err != nil {
		return nil, nil, err
	}
	is, err := s.Email.Invitations(ctx, userID, in.ProjectID)
	if err != nil {
		return nil, nil, s.toolError(err, "project")
	}
	out := make([]map[string]any, 0, len(is))
	for _, i := range is {
		out = append(out, invitationJSON(i))
	}
	return nil, map[string]any{"invitations": out, "email_enabled": s.Email.Enabled()}, nil
}
