package service

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/otelcol-svc/otelcol-svc/controlplane/auth"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/outbound"
)

// Single sign-on with one OpenID Connect provider for the whole instance. The control plane
// has no instance administrator, so the provider is the operator's setting, from the
// environment (SSOConfigFromEnv), as SVC_SMTP_URL is.

// Environment variables of the provider.
const (
	EnvOIDCIssuer         = "SVC_OIDC_ISSUER"
	EnvOIDCClientID       = "SVC_OIDC_CLIENT_ID"
	EnvOIDCClientSecret   = "SVC_OIDC_CLIENT_SECRET"
	EnvOIDCAllowedDomains = "SVC_OIDC_ALLOWED_DOMAINS"
	EnvOIDCName           = "SVC_OIDC_NAME"
)

// ssoTimeout bounds each call to the provider (discovery, token exchange, user info): a
// login waits on it, and a hanging provider must not hold the request for good.
const ssoTimeout = 10 * time.Second

// ssoMaxBody bounds what the control plane reads of a provider's answer: go-oidc reads
// discovery, keys and user info whole.
const ssoMaxBody = 1 << 20

// SSOConfig is the instance's OpenID Connect provider.
type SSOConfig struct {
	Issuer       string
	ClientID     string
	ClientSecret string
	// AllowedDomains are the email domains that may log in (lowercase); empty: any.
	AllowedDomains []string
	// Name is what the login page's button says: "Log in with <Name>".
	Name string
}

// SSOConfigFromEnv reads the provider from the environment; a zero SSOConfig (and no
// error) when SVC_OIDC_ISSUER is unset. The secret is never part of an error.
func SSOConfigFromEnv(getenv func(string) string) (SSOConfig, error) {
	c := SSOConfig{Issuer: strings.TrimSpace(getenv(EnvOIDCIssuer)), ClientID: strings.TrimSpace(getenv(EnvOIDCClientID)),
		ClientSecret: getenv(EnvOIDCClientSecret), Name: strings.TrimSpace(getenv(EnvOIDCName))}
	if c.Issuer == "" {
		return SSOConfig{}, nil
	}
	if err := outbound.CheckURL(c.Issuer); err != nil {
		return SSOConfig{}, fmt.Errorf("%s: %w", EnvOIDCIssuer, err)
	}
	// Discovery and the signing keys over plain HTTP let anyone on the path swap the keys
	// and forge ID tokens for any address, and the client secret would go in clear; only a
	// provider on this host (a development setup) may be reached without TLS.
	if u, _ := url.Parse(c.Issuer); u.Scheme != "https" && !loopbackHost(u.Hostname()) {
		return SSOConfig{}, fmt.Errorf("%s must be an https:// URL (http:// only for a provider on loopback)", EnvOIDCIssuer)
	}
	if c.ClientID == "" || c.ClientSecret == "" {
		return SSOConfig{}, fmt.Errorf("%s needs %s and %s", EnvOIDCIssuer, EnvOIDCClientID, EnvOIDCClientSecret)
	}
	for _, d := range strings.Split(getenv(EnvOIDCAllowedDomains), ",") {
		d = strings.ToLower(strings.TrimPrefix(strings.TrimSpace(d), "@"))
		if d == "" {
			continue
		}
		if strings.ContainsAny(d, "@/ ") || !strings.Contains(d, ".") {
			return SSOConfig{}, fmt.Errorf("%s: %q is not a domain like example.com", EnvOIDCAllowedDomains, d)
		}
		c.AllowedDomains = append(c.AllowedDomains, d)
	}
	if c.Name == "" {
		c.Name = "single sign-on"
		if u, err := url.Parse(c.Issuer); err == nil {
			c.Name = u.Hostname()
		}
	}
	if len(c.Name) > 64 {
		c.Name = c.Name[:64]
	}
	return c, nil
}

func loopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(h)
	return err == nil && a.IsLoopback()
}

// SSO logs people in through the provider: the authorization code flow with PKCE, state
// and nonce (the caller keeps those three between the two legs), then the ID token
// verified by go-oidc and the account linked by verified email.
type SSO struct {
	Svc    *Service
	Config SSOConfig
	Logger *slog.Logger
	client *http.Client

	mu       sync.Mutex
	provider *oidc.Provider
}

// NewSSO returns the provider's client; nil when c names no provider. The provider is
// called through the SSRF-safe client, so a private issuer needs SVC_OUTBOUND_ALLOW.
func NewSSO(svc *Service, c SSOConfig, allow []netip.Prefix, logger *slog.Logger) *SSO {
	if c.Issuer == "" {
		return nil
	}
	cl := outbound.NewClient(outbound.Options{AllowCIDRs: allow, Timeout: ssoTimeout})
	cl.Transport = boundedBodies{next: cl.Transport}
	return &SSO{Svc: svc, Config: c, Logger: logger, client: cl}
}

// boundedBodies cuts every answer at ssoMaxBody: go-oidc and oauth2 read them whole, and
// the client has no such bound of its own.
type boundedBodies struct{ next http.RoundTripper }

func (b boundedBodies) RoundTrip(r *http.Request) (*http.Response, error) {
	next := b.next
	if next == nil {
		next = http.DefaultTransport
	}
	resp, err := next.RoundTrip(r)
	if err == nil {
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.LimitReader(resp.Body, ssoMaxBody), resp.Body}
	}
	return resp, err
}

func (s *SSO) ctx(ctx context.Context) context.Context { return oidc.ClientContext(ctx, s.client) }

// discover fetches the provider's configuration once; a failure is tried again at the
// next login, so a provider down at start does not disable SSO until a restart.
func (s *SSO) discover(ctx context.Context) (*oidc.Provider, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.provider != nil {
		return s.provider, nil
	}
	ctx, cancel := context.WithTimeout(s.ctx(ctx), ssoTimeout)
	defer cancel()
	p, err := oidc.NewProvider(ctx, s.Config.Issuer)
	if err != nil {
		return nil, err
	}
	s.provider = p
	return p, nil
}

func (s *SSO) oauth(p *oidc.Provider, redirectURL string) *oauth2.Config {
	return &oauth2.Config{ClientID: s.Config.ClientID, ClientSecret: s.Config.ClientSecret, Endpoint: p.Endpoint(),
		RedirectURL: redirectURL, Scopes: []string{oidc.ScopeOpenID, "email", "profile"}}
}

// ErrSSOUnavailable is a provider that cannot be reached or answered wrongly.
var ErrSSOUnavailable = errors.New("the identity provider cannot be reached")

// AuthCodeURL is where the browser goes to log in at the provider.
func (s *SSO) AuthCodeURL(ctx context.Context, redirectURL, state, nonce, verifier string) (string, error) {
	p, err := s.discover(ctx)
	if err != nil {
		s.Logger.Warn("sso: provider discovery failed", "issuer", s.Config.Issuer, "error", err)
		return "", ErrSSOUnavailable
	}
	return s.oauth(p, redirectURL).AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)), nil
}

// SSORefusal is a login the provider vouched for that this instance does not accept; its
// Code is what the login page shows a message for.
type SSORefusal struct {
	Code   string
	Reason string
}

func (e *SSORefusal) Error() string { return e.Reason }

// Refusal codes of SSO logins.
const (
	SSODomain     = "domain"
	SSOUnverified = "unverified"
	// SSOSubject: the address's account is linked to another person at the provider.
	SSOSubject = "subject"
)

// Identity is what the provider vouched for.
type Identity struct {
	Subject string
	Email   string
}

// Exchange trades the code for tokens, verifies the ID token (signature, issuer,
// audience, expiry, nonce) and returns the person's verified email: from the ID token, or
// from the user info endpoint for the same subject when the ID token has none (providers
// may keep claims out of it when an access token is issued).
func (s *SSO) Exchange(ctx context.Context, redirectURL, code, verifier, nonce string) (Identity, error) {
	p, err := s.discover(ctx)
	if err != nil {
		return Identity{}, ErrSSOUnavailable
	}
	ctx, cancel := context.WithTimeout(s.ctx(ctx), ssoTimeout)
	defer cancel()
	conf := s.oauth(p, redirectURL)
	tok, err := conf.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		return Identity{}, fmt.Errorf("exchanging the code: %w", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return Identity{}, errors.New("the provider answered no ID token")
	}
	idt, err := p.Verifier(&oidc.Config{ClientID: s.Config.ClientID}).Verify(ctx, raw)
	if err != nil {
		return Identity{}, fmt.Errorf("verifying the ID token: %w", err)
	}
	if idt.Nonce != nonce {
		return Identity{}, errors.New("the ID token's nonce is not this login's")
	}
	var c struct {
		Email         string `json:"email"`
		EmailVerified *bool  `json:"email_verified"`
	}
	if err := idt.Claims(&c); err != nil {
		return Identity{}, fmt.Errorf("reading the ID token: %w", err)
	}
	if c.Email == "" {
		ui, err := p.UserInfo(ctx, conf.TokenSource(ctx, tok))
		if err != nil {
			return Identity{}, fmt.Errorf("reading user info: %w", err)
		}
		if ui.Subject != idt.Subject {
			return Identity{}, errors.New("the user info is not the ID token's subject")
		}
		v := ui.EmailVerified
		c.Email, c.EmailVerified = ui.Email, &v
	}
	email, ok := NormalizeEmail(c.Email)
	if !ok {
		return Identity{}, &SSORefusal{Code: SSOUnverified, Reason: "the provider gave no usable email address"}
	}
	if c.EmailVerified == nil || !*c.EmailVerified {
		return Identity{}, &SSORefusal{Code: SSOUnverified, Reason: "the provider does not say " + email + " is verified"}
	}
	return Identity{Subject: idt.Subject, Email: email}, nil
}

// DomainAllowed tells whether an email's domain may log in.
func (s *SSO) DomainAllowed(email string) bool {
	if len(s.Config.AllowedDomains) == 0 {
		return true
	}
	at := strings.LastIndexByte(email, '@')
	if at < 0 {
		return false
	}
	d := strings.ToLower(email[at+1:])
	for _, a := range s.Config.AllowedDomains {
		if d == a {
			return true
		}
	}
	return false
}

// What an SSO login did to the account it logged in to.
const (
	SSOLoggedIn = "login"   // a verified account, unchanged
	SSOCreated  = "created" // a new account
	SSOClaimed  = "claimed" // an unverified account, claimed (see Account)
)

// Account returns the account the identity logs in as: the one with its email, or a new
// one, verified (the provider vouched for the address) whose password nobody knows (a
// reset link sets one).
//
// An existing account whose address was never verified may have been made by someone
// else with this person's address, who knows its password: it is marked verified, its
// password is replaced by an unusable one and every credential it held ends, so only the
// provider's person uses it from now on.
func (s *SSO) Account(ctx context.Context, id Identity) (store.User, string, error) {
	if !s.DomainAllowed(id.Email) {
		return store.User{}, "", &SSORefusal{Code: SSODomain, Reason: id.Email + " is not in a domain allowed to log in here"}
	}
	now := time.Now().UTC()
	// The password of an account made or claimed here is one nobody knows: a real argon2id
	// hash, so a password login against it takes as long as any other and tells nothing.
	unusable, err := auth.HashPassword(rand.Text())
	if err != nil {
		return store.User{}, "", err
	}
	var u store.User
	var outcome string
	var ended []string
	err = s.Svc.Store.InTx(ctx, func(tx *store.Tx) error {
		outcome, ended = SSOLoggedIn, nil
		var err error
		u, err = tx.UserByEmail(ctx, id.Email)
		if errors.Is(err, store.ErrNotFound) {
			outcome = SSOCreated
			u = store.User{ID: NewID("u_"), Email: id.Email, PasswordHash: unusable, CreatedAt: now}
			auditSSO(ctx, u, "account.sso_create", nil, map[string]string{"email": u.Email, "verified_by": s.Config.Name})
			if err := tx.CreateSSOUser(ctx, u, now); err != nil {
				return err
			}
			return tx.SetSSOSubject(ctx, u.ID, id.Subject)
		}
		if err != nil {
			return err
		}
		// The first SSO login links the account to the provider's subject; another subject
		// with the same address (a mailbox given to someone new, or an address a provider
		// admin marked verified) is another person and does not get the account.
		if err := tx.SetSSOSubject(ctx, u.ID, id.Subject); errors.Is(err, store.ErrConflict) {
			return &SSORefusal{Code: SSOSubject, Reason: id.Email + "'s account is linked to another identity at the provider"}
		} else if err != nil {
			return err
		}
		verified, err := tx.EmailVerified(ctx, u.ID)
		if err != nil || verified {
			return err
		}
		outcome = SSOClaimed
		owned, revoked, err := s.revokeOwnedProjectKeys(ctx, tx, u.ID)
		if err != nil {
			return err
		}
		auditSSO(ctx, u, "account.sso_claim", map[string]any{"email_verified": "no", "password": "set", "owned_projects": owned},
			map[string]any{"email_verified": "by " + s.Config.Name, "password": "unusable", "owned_projects": owned, "project_keys_revoked": revoked})
		if err := tx.ClaimBySSO(ctx, u.ID, unusable, now); err != nil {
			return err
		}
		// In the claim's transaction: the claim stands only with the credentials ended.
		ended, err = revokeAllTx(ctx, tx, u.ID)
		return err
	})
	if err == nil && outcome == SSOClaimed {
		s.Logger.Info("sso: an unverified account was claimed through the provider; its password and credentials ended", "user", u.ID)
		s.Svc.RevokeCredentials(ctx, ended...)
	}
	return u, outcome, err
}

// revokeOwnedProjectKeys revokes every API key of the projects a claimed account owns:
// whoever held the account before the claim made them and may keep one (a read-scoped key
// reads the projects' data) after the rightful owner starts using the projects. It
// returns the projects, for the claim's record, and how many keys ended.
func (s *SSO) revokeOwnedProjectKeys(ctx context.Context, tx *store.Tx, userID string) ([]string, int, error) {
	ps, roles, err := tx.ProjectsForUser(ctx, userID)
	if err != nil {
		return nil, 0, err
	}
	owned := []string{}
	revoked := 0
	var ms *mirror.Store
	for i, p := range ps {
		if roles[i] != store.RoleOwner {
			continue
		}
		owned = append(owned, p.ID)
		keys, err := tx.Keys(ctx, p.ID)
		if err != nil {
			return nil, 0, err
		}
		for _, k := range keys {
			if ms == nil {
				if ms, err = s.Svc.mirrorForChange(ctx); err != nil {
					return nil, 0, err
				}
			}
			if _, err := tx.DeleteKey(ctx, p.ID, k.ID); err != nil {
				return nil, 0, err
			}
			if err := ms.DeleteKey(ctx, k.Hash); err != nil {
				return nil, 0, err
			}
			_ = ms.ForgetKeyUsage(ctx, k.ID)
			revoked++
		}
	}
	return owned, revoked, nil
}

// auditSSO names the account an SSO login changes in the record ctx carries (the caller
// could not: the account is known only here).
func auditSSO(ctx context.Context, u store.User, action string, before, after any) {
	ev := store.AuditOf(ctx)
	if ev == nil {
		return
	}
	ev.ActorID, ev.ActorEmail, ev.AccountID = u.ID, u.Email, u.ID
	ev.SetAction(action)
	ev.SetTarget(u.ID)
	ev.Change(before, after)
}

// maxJoinDomains bounds a project's SSO join domains.
const maxJoinDomains = 20

// ProjectSSODomains lists the email domains whose people join the project as members at
// an SSO login; any member may read them.
func (s *SSO) ProjectSSODomains(ctx context.Context, userID, projectID string) (domains []string, err error) {
	err = s.Svc.InProject(ctx, userID, projectID, Read, func(ctx context.Context, tx *store.Tx, p store.Project, _ string, _ *mirror.Store) error {
		domains, err = tx.ProjectSSODomains(ctx, p.ID)
		return err
	})
	return domains, err
}

// SetProjectSSODomains replaces them (owners and admins). A join hands the project every
// SSO person of the domain, and their addresses on its Members list, so a domain may be
// named only by someone whose own account is verified at exactly that domain (one named
// before may stay), and only on an instance that lists its allowed domains: with any
// domain allowed (a public provider), gmail.com would be anyone's to name.
func (s *SSO) SetProjectSSODomains(ctx context.Context, userID, projectID string, in []string) ([]string, error) {
	domains, err := normalizeJoinDomains(in, s.DomainAllowed)
	if err != nil {
		return nil, err
	}
	if len(domains) > 0 && len(s.Config.AllowedDomains) == 0 {
		return nil, apierror.New(http.StatusConflict, apierror.Conflict,
			"projects can name join domains only when the instance lists its own (SVC_OIDC_ALLOWED_DOMAINS)")
	}
	err = s.Svc.InProject(ctx, userID, projectID, Write, func(ctx context.Context, tx *store.Tx, p store.Project, _ string, _ *mirror.Store) error {
		before, err := tx.ProjectSSODomains(ctx, p.ID)
		if err != nil {
			return err
		}
		if err := s.mayName(ctx, tx, userID, domains, before); err != nil {
			return err
		}
		store.AuditOf(ctx).Change(map[string]any{"sso_join_domains": before}, map[string]any{"sso_join_domains": domains})
		return tx.SetProjectSSODomains(ctx, p.ID, domains)
	})
	return domains, err
}

// mayName refuses a domain new to the project unless the caller's own address is at it
// and verified (by a link or by the provider).
func (s *SSO) mayName(ctx context.Context, tx *store.Tx, userID string, domains, before []string) error {
	var own string
	verified := false
	for _, d := range domains {
		if slices.Contains(before, d) {
			continue
		}
		if own == "" {
			u, err := tx.UserByID(ctx, userID)
			if err != nil {
				return err
			}
			own = strings.ToLower(u.Email[strings.LastIndexByte(u.Email, '@')+1:])
			if verified, err = tx.EmailVerified(ctx, userID); err != nil {
				return err
			}
		}
		if d != own || !verified {
			return apierror.New(http.StatusForbidden, apierror.Forbidden, fmt.Sprintf(
				"%s can be named only by someone whose own verified address is at %s", d, d))
		}
	}
	return nil
}

// normalizeJoinDomains reads the domains a project names: lowercased, without a leading
// @, deduplicated and sorted; each one allowed (by the instance's allowed domains).
func normalizeJoinDomains(in []string, allowed func(email string) bool) ([]string, error) {
	if len(in) > maxJoinDomains {
		return nil, BadBody(fmt.Sprintf("at most %d domains", maxJoinDomains))
	}
	seen := map[string]bool{}
	domains := []string{}
	for _, d := range in {
		d = strings.ToLower(strings.TrimPrefix(strings.TrimSpace(d), "@"))
		if d == "" || seen[d] {
			continue
		}
		if !domainShaped(d) {
			return nil, BadBody(fmt.Sprintf("%q is not a domain like example.com", clipString(d, 32)))
		}
		if !allowed("x@" + d) {
			return nil, BadBody(fmt.Sprintf("%s cannot log in by single sign-on here (not in %s)", d, "SVC_OIDC_ALLOWED_DOMAINS"))
		}
		seen[d] = true
		domains = append(domains, d)
	}
	sort.Strings(domains)
	return domains, nil
}

// domainShaped: letters, digits, hyphens and inner dots, at least two labels, as a DNS
// name is written (no IDN: providers give addresses in their ASCII form).
func domainShaped(d string) bool {
	if len(d) > 253 || !strings.Contains(d, ".") || strings.HasPrefix(d, ".") || strings.HasSuffix(d, ".") || strings.Contains(d, "..") {
		return false
	}
	for i := 0; i < len(d); i++ {
		c := d[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

func clipString(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// JoinProjects makes u a member of every project that lets people of its email's domain
// join, each in its own transaction published to the mirror and recorded in the
// project's audit log; a failure is logged and the login goes on (the person can be added
// by hand).
func (s *SSO) JoinProjects(ctx context.Context, u store.User, addr string) {
	domain := u.Email[strings.LastIndexByte(u.Email, '@')+1:]
	var ids []string
	err := s.Svc.Store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		ids, err = tx.ProjectsJoinedBySSODomain(ctx, domain)
		return err
	})
	if err != nil {
		s.Logger.Warn("sso: listing the projects of the email's domain failed", "user", u.ID, "error", err)
		return
	}
	// One project failing does not keep the person out of the others.
	for _, id := range ids {
		actx := Audited(ctx, Actor{UserID: u.ID, Email: u.Email, CredKind: "sso", Addr: addr}, id, "member.join_sso", u.ID)
		err = s.Svc.Store.InTx(actx, func(tx *store.Tx) error {
			if _, _, err := tx.ProjectForUser(actx, id, u.ID); err == nil {
				return nil // already a member, in whatever role
			}
			// Joined once and no longer a member: removed (or left) since, which a
			// login must not undo; an owner or admin can add them back by hand.
			if joined, err := tx.SSOJoined(actx, id, u.ID); err != nil || joined {
				return err
			}
			p, err := tx.ProjectByID(actx, id)
			if err != nil {
				return err
			}
			ms, err := s.Svc.mirrorForChange(actx)
			if err != nil {
				return err
			}
			store.AuditOf(actx).Change(nil, map[string]string{"email": u.Email, "role": store.RoleMember})
			if err := tx.PutMember(actx, p.ID, u.ID, store.RoleMember); err != nil {
				return err
			}
			if err := tx.RecordSSOJoin(actx, p.ID, u.ID); err != nil {
				return err
			}
			return saveProject(actx, tx, ms, &p)
		})
		if err != nil {
			s.Logger.Warn("sso: joining a project of the email's domain failed", "user", u.ID, "project", id, "error", err)
		}
	}
}
