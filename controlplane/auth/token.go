package auth

import (
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const issuer = "otelcol-svc"

// Tokens issues and checks the control plane's JWTs (HS256).
type Tokens struct {
	secret []byte
	ttl    time.Duration
}

// NewTokens uses secret (at least 32 bytes) and token lifetime ttl.
func NewTokens(secret []byte, ttl time.Duration) (*Tokens, error) {
	if len(secret) < 32 {
		return nil, errors.New("the JWT secret must be at least 32 bytes")
	}
	return &Tokens{secret: secret, ttl: ttl}, nil
}

// Claims of a user token. Purpose separates login tokens from others the control plane
// may mint (e.g. short-lived read tokens for the data plane).
type Claims struct {
	Email   string `json:"email,omitempty"`
	Purpose string `json:"purpose,omitempty"`
	// Generation is the user's login generation the token was issued under: it counts
	// only while that is still the user's (logging out everywhere raises it). Tokens
	// issued before generations existed have 0, the generation every user starts with.
	Generation int64 `json:"gen,omitempty"`
	jwt.RegisteredClaims
}

// Issue returns a signed token for a user of login generation 0.
func (t *Tokens) Issue(userID, email string, now time.Time) (string, error) {
	return t.IssueGeneration(userID, email, 0, now)
}

// IssueGeneration returns a signed token for a user, under the user's login generation.
func (t *Tokens) IssueGeneration(userID, email string, gen int64, now time.Time) (string, error) {
	c := Claims{Email: email, Purpose: "login", Generation: gen, RegisteredClaims: jwt.RegisteredClaims{
		Subject: userID, Issuer: issuer, IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(t.ttl)),
	}}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(t.secret)
}

// Parse verifies a token (signature, algorithm, issuer, expiry) and returns its claims.
func (t *Tokens) Parse(token string) (*Claims, error) {
	var c Claims
	_, err := jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return t.secret, nil },
		jwt.WithValidMethods([]string{"HS256"}), jwt.WithIssuer(issuer), jwt.WithExpirationRequired())
	if err != nil {
		return nil, fmt.Errorf("invalid token: %w", err)
	}
	if c.Subject == "" || c.Purpose != "login" {
		return nil, errors.New("invalid token: not a login token")
	}
	return &c, nil
}
