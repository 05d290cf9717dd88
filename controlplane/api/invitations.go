package api

import (
	"net/http"

	"github.com/otelcol-svc/otelcol-svc/controlplane/service"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
)

func invitationJSON(i store.Invitation) map[string]any {
	out := map[string]any{"id": i.ID, "email": i.Email, "role": i.Role, "invited_by": i.InvitedBy,
		"created_at": ts(i.CreatedAt), "expires_at": ts(i.ExpiresAt)}
	if i.InvitedByEmail != "" {
		out["invited_by_email"] = i.InvitedByEmail
	}
	return out
}

// addMemberOrInvite is POST .../members: a verified account becomes a member (201, as
// before email); any other address gets an invitation by email (202).
func (s *Server) addMemberOrInvite(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Email string `json:"email"`
		Role  string `json:"role"`
	}
	if e := decode(r, &b); e != nil {
		fail(w, e)
		return
	}
	if !s.Email.Enabled() {
		// No mail: accounts are added as they are, verified or not (nothing could verify
		// them), and an address without one is refused saying invitations need email.
		u, role, err := s.Svc.AddMember(r.Context(), currentUser(r).ID, r.PathValue("id"), b.Email, b.Role)
		s.respond(w, r, err, http.StatusCreated, func() any { return map[string]any{"user_id": u.ID, "email": u.Email, "role": role} })
		return
	}
	u, inv, err := s.Email.Invite(r.Context(), currentUser(r).ID, r.PathValue("id"), b.Email, b.Role)
	if err != nil {
		s.answer(w, r, err, "project")
		return
	}
	if inv != nil {
		writeJSON(w, http.StatusAccepted, map[string]any{"invitation": invitationJSON(*inv)})
		return
	}
	role := b.Role
	if role == "" {
		role = store.RoleMember
	}
	writeJSON(w, http.StatusCreated, map[string]any{"user_id": u.ID, "email": u.Email, "role": role})
}

func (s *Server) listInvitations(w http.ResponseWriter, r *http.Request) {
	is, err := s.Email.Invitations(r.Context(), currentUser(r).ID, r.PathValue("id"))
	s.respond(w, r, err, http.StatusOK, func() any {
		out := make([]map[string]any, 0, len(is))
		for _, i := range is {
			out = append(out, invitationJSON(i))
		}
		return map[string]any{"invitations": out, "email_enabled": s.Email.Enabled()}
	})
}

func (s *Server) deleteInvitation(w http.ResponseWriter, r *http.Request) {
	err := s.Email.RevokeInvitation(r.Context(), currentUser(r).ID, r.PathValue("id"), r.PathValue("invitation_id"))
	s.respond(w, r, err, http.StatusNoContent, nil)
}

type tokenBody struct {
	Token    string `json:"token"`
	Password string `json:"password"`
}

// invitationInfo shows the invitation page what it invites to, by the link's secret
// (sent in the body, not the URL, where proxies would log it).
func (s *Server) invitationInfo(w http.ResponseWriter, r *http.Request) {
	if !s.takeLinkUse(w, r) {
		return
	}
	var b tokenBody
	if e := decode(r, &b); e != nil {
		fail(w, e)
		return
	}
	info, err := s.Email.Invitation(r.Context(), b.Token)
	s.respond(w, r, err, http.StatusOK, func() any {
		out := map[string]any{"email": info.Email, "project": info.Project, "project_id": info.ProjectID, "role": info.Role,
			"has_account": info.HasAccount, "expires_at": ts(info.ExpiresAt)}
		if info.InvitedBy != "" {
			out["invited_by"] = info.InvitedBy
		}
		return out
	})
}

// acceptInvitation signs the invited address up (or logs it in) into the project and
// answers a login token; acceptInvitationSession starts a dashboard session instead.
func (s *Server) acceptInvitation(w http.ResponseWriter, r *http.Request) {
	if u, _, ok := s.accept(w, r); ok {
		s.respondToken(w, r, http.StatusOK, u)
	}
}

func (s *Server) acceptInvitationSession(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(w, r) {
		return
	}
	if u, _, ok := s.accept(w, r); ok {
		s.startSession(w, r, http.StatusOK, u)
	}
}

func (s *Server) accept(w http.ResponseWriter, r *http.Request) (store.User, string, bool) {
	if !s.takeLinkUse(w, r) {
		return store.User{}, "", false
	}
	var b tokenBody
	if e := decode(r, &b); e != nil {
		fail(w, e)
		return store.User{}, "", false
	}
	u, inv, err := s.Email.AcceptInvitation(r.Context(), b.Token, b.Password)
	if err != nil {
		s.answer(w, r, err, "invitation")
		return store.User{}, "", false
	}
	// No actor before the link was used, so no route records it: the member who joined is.
	if err := s.Svc.RecordAudit(r.Context(), service.Actor{UserID: u.ID, Email: u.Email, CredKind: "email_link", Addr: s.clientAddr(r)},
		inv.ProjectID, "invitation.accept", inv.ID); err != nil {
		s.Logger.Warn("accepted invitation not recorded in the audit log", "invitation", inv.ID, "error", err)
	}
	return u, inv.ProjectID, true
}
