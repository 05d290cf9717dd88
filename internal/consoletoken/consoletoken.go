// Package consoletoken issues and verifies console tokens: short-lived JWTs with which the
// dashboard, running in a user's browser, reads one project's recent records and fields
// straight from the receiver (GET /console/v1/projects/{id}/...), so payloads never pass
// through the control plane.
//
// The control plane signs with an Ed25519 private key it alone holds and publishes the
// public keys in the configuration mirror (bucket svc-settings, key console-token-keys);
// receivers verify with those. A token is pinned to EdDSA, audience
// "otelcol-svc-console", issuer "otelcol-svc" and purpose "console", so neither a
// control-plane login token (HS256, purpose "login") nor a token signed for another
// audience is ever accepted here, and a console token is not a login token either.
//
// A token also names the membership it was issued under (claim "grant"); receivers honour
// it only while the project's mirror entry lists that grant for the user, so removing a
// member ends their tokens within the mirror's latency, not at expiry.
//
// And it names the credential it was minted with (claim "cred": a personal access token's,
// a dashboard session's or an OAuth grant's id): when that credential is revoked or its
// session logged out, the control plane publishes the id in the mirror's revocations
// (mirror.BucketRevocations), and receivers refuse every token naming it, so a console
// token never outlives what minted it by more than the mirror's latency.
//
// It may carry the user's email (claim "email", added later, so optional): receivers name
// the person who acted on something (an incident's acknowledged_by) by it, and fall back
// to the user id for a token minted before the claim existed.
package consoletoken

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Fixed claims of every console token.
const (
	Audience = "otelcol-svc-console"
	Issuer   = "otelcol-svc"
	Purpose  = "console"
)

// MaxTTL is the longest lifetime Issue gives a token: the dashboard fetches a new one when
// its token nears expiry, and a leaked token is useless soon.
const MaxTTL = time.Hour

// Leeway tolerates clock differences between the control plane and receivers.
const Leeway = 30 * time.Second

// Claims are what a console token says.
type Claims struct {
	UserID    string
	ProjectID string
	// Grant names the membership the token was issued under (when it began, unix
	// milliseconds; mirror.Project.Members): receivers honour the token only while the
	// project's mirror entry lists the same grant for the user.
	Grant int64
	// Credential is the id of the credential the token was minted with (empty for a
	// login token, which cannot be revoked): receivers refuse the token once the mirror
	// lists it as revoked.
	Credential string
	// Email is the user's email when the token was minted, for naming who acted; empty
	// in tokens minted before the claim existed.
	Email string
	// ReadOnly tokens were minted with a read-only credential (a personal access token
	// limited to reading): receivers refuse them every change, whatever the user's role.
	ReadOnly bool
	// ExpiresAt is set by Issue (now + ttl) and returned by Verify.
	ExpiresAt time.Time
}

// Errors of Verify. ErrInvalid wraps the reason (expired, bad signature, wrong audience).
var (
	ErrNoKeys  = errors.New("no console token keys are configured yet")
	ErrInvalid = errors.New("invalid console token")
)

type jwtClaims struct {
	ProjectID string `json:"project_id"`
	Grant     int64  `json:"grant"`
	Cred      string `json:"cred,omitempty"`
	Email     string `json:"email,omitempty"`
	ReadOnly  bool   `json:"ro,omitempty"`
	Purpose   string `json:"purpose"`
	jwt.RegisteredClaims
}

// Issue signs a token for c.UserID to read c.ProjectID, valid for ttl (at most MaxTTL)
// from now. c.ExpiresAt is ignored.
func Issue(priv ed25519.PrivateKey, c Claims, ttl time.Duration, now time.Time) (string, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return "", errors.New("consoletoken: the private key is not an Ed25519 private key")
	}
	if c.UserID == "" || c.ProjectID == "" || c.Grant <= 0 {
		return "", errors.New("consoletoken: a token needs a user id, a project id and the membership's grant")
	}
	if ttl <= 0 || ttl > MaxTTL {
		return "", fmt.Errorf("consoletoken: the lifetime must be positive and at most %s, got %s", MaxTTL, ttl)
	}
	claims := jwtClaims{
		ProjectID: c.ProjectID,
		Grant:     c.Grant,
		Cred:      c.Credential,
		Email:     c.Email,
		ReadOnly:  c.ReadOnly,
		Purpose:   Purpose,
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    Issuer,
			Subject:   c.UserID,
			Audience:  jwt.ClaimStrings{Audience},
			IssuedAt:  jwt.NewNumericDate(now),
			NotBefore: jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
		},
	}
	return jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims).SignedString(priv)
}

// Verify checks a token against the published public keys (any of them may have signed
// it: a rotation publishes the new key beside the old one) at time now, and returns its
// claims. The error wraps ErrNoKeys when keys is empty, else ErrInvalid.
func Verify(keys []ed25519.PublicKey, token string, now time.Time) (Claims, error) {
	if len(keys) == 0 {
		return Claims{}, ErrNoKeys
	}
	set := jwt.VerificationKeySet{Keys: make([]jwt.VerificationKey, 0, len(keys))}
	for _, k := range keys {
		if len(k) == ed25519.PublicKeySize {
			set.Keys = append(set.Keys, k)
		}
	}
	if len(set.Keys) == 0 {
		return Claims{}, ErrNoKeys
	}
	var c jwtClaims
	_, err := jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return set, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}),
		jwt.WithAudience(Audience),
		jwt.WithIssuer(Issuer),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(Leeway),
		jwt.WithTimeFunc(func() time.Time { return now }),
	)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if c.Purpose != Purpose {
		return Claims{}, fmt.Errorf("%w: not a console token", ErrInvalid)
	}
	if c.Subject == "" || c.ProjectID == "" || c.Grant <= 0 {
		return Claims{}, fmt.Errorf("%w: no user, project or membership grant", ErrInvalid)
	}
	// A token that lives longer than Issue allows was not made by Issue.
	if c.IssuedAt == nil || c.ExpiresAt.Sub(c.IssuedAt.Time) > MaxTTL {
		return Claims{}, fmt.Errorf("%w: lifetime longer than %s", ErrInvalid, MaxTTL)
	}
	return Claims{UserID: c.Subject, ProjectID: c.ProjectID, Grant: c.Grant, Credential: c.Cred, Email: c.Email, ReadOnly: c.ReadOnly, ExpiresAt: c.ExpiresAt.Time.UTC()}, nil
}
