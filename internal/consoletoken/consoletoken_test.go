package consoletoken

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var now = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

func keyPair(t *testing.T) (ed25519.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	return pub, priv
}

func TestIssueVerify(t *testing.T) {
	pub, priv := keyPair(t)
	tok, err := Issue(priv, Claims{UserID: "u1", ProjectID: "p1", Grant: 7, Credential: "pat_1"}, 10*time.Minute, now)
	require.NoError(t, err)
	c, err := Verify([]ed25519.PublicKey{pub}, tok, now.Add(time.Minute))
	require.NoError(t, err)
	assert.Equal(t, Claims{UserID: "u1", ProjectID: "p1", Grant: 7, Credential: "pat_1", ExpiresAt: now.Add(10 * time.Minute)}, c)

	// Expired (past the leeway).
	_, err = Verify([]ed25519.PublicKey{pub}, tok, now.Add(10*time.Minute+Leeway+time.Second))
	assert.ErrorIs(t, err, ErrInvalid)
	// Not yet valid.
	_, err = Verify([]ed25519.PublicKey{pub}, tok, now.Add(-time.Hour))
	assert.ErrorIs(t, err, ErrInvalid)
}

// A token names its user's email, so a receiver can say who acted; a token minted before
// the claim existed (no "email") keeps working and names no email.
func TestEmail(t *testing.T) {
	pub, priv := keyPair(t)
	keys := []ed25519.PublicKey{pub}
	tok, err := Issue(priv, Claims{UserID: "u1", ProjectID: "p1", Grant: 7, Email: "ana@example.com"}, time.Minute, now)
	require.NoError(t, err)
	c, err := Verify(keys, tok, now)
	require.NoError(t, err)
	assert.Equal(t, "ana@example.com", c.Email)
	assert.Equal(t, "u1", c.UserID, "the user is still named by id: memberships and roles are keyed by it")

	old, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{"iss": Issuer, "sub": "u1", "aud": Audience,
		"project_id": "p1", "grant": 7, "cred": "pat_1", "purpose": Purpose,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Minute).Unix()}).SignedString(priv)
	require.NoError(t, err)
	c, err = Verify(keys, old, now)
	require.NoError(t, err, "a token without the email claim still verifies")
	assert.Equal(t, Claims{UserID: "u1", ProjectID: "p1", Grant: 7, Credential: "pat_1", ExpiresAt: now.Add(time.Minute)}, c)
}

func TestRotation(t *testing.T) {
	oldPub, oldPriv := keyPair(t)
	newPub, newPriv := keyPair(t)
	oldTok, err := Issue(oldPriv, Claims{UserID: "u", ProjectID: "p", Grant: 7}, time.Minute, now)
	require.NoError(t, err)
	newTok, err := Issue(newPriv, Claims{UserID: "u", ProjectID: "p", Grant: 7}, time.Minute, now)
	require.NoError(t, err)
	both := []ed25519.PublicKey{newPub, oldPub}
	for _, tok := range []string{oldTok, newTok} {
		_, err := Verify(both, tok, now)
		assert.NoError(t, err)
	}
	// Once the old key is withdrawn, its tokens stop working.
	_, err = Verify([]ed25519.PublicKey{newPub}, oldTok, now)
	assert.ErrorIs(t, err, ErrInvalid)
}

func TestRefusesOtherTokens(t *testing.T) {
	pub, priv := keyPair(t)
	keys := []ed25519.PublicKey{pub}
	sign := func(method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
		tok, err := jwt.NewWithClaims(method, claims).SignedString(key)
		require.NoError(t, err)
		return tok
	}
	valid := func() jwt.MapClaims {
		return jwt.MapClaims{"iss": Issuer, "sub": "u", "aud": Audience, "project_id": "p", "grant": 7, "purpose": Purpose,
			"iat": now.Unix(), "exp": now.Add(time.Minute).Unix()}
	}
	// The baseline passes, so each case below fails for its one difference.
	_, err := Verify(keys, sign(jwt.SigningMethodEdDSA, priv, valid()), now)
	require.NoError(t, err)

	with := func(k string, v any) jwt.MapClaims {
		c := valid()
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	cases := map[string]string{
		"login purpose":      sign(jwt.SigningMethodEdDSA, priv, with("purpose", "login")),
		"no purpose":         sign(jwt.SigningMethodEdDSA, priv, with("purpose", nil)),
		"other audience":     sign(jwt.SigningMethodEdDSA, priv, with("aud", "otelcol-svc")),
		"no audience":        sign(jwt.SigningMethodEdDSA, priv, with("aud", nil)),
		"other issuer":       sign(jwt.SigningMethodEdDSA, priv, with("iss", "someone")),
		"no expiry":          sign(jwt.SigningMethodEdDSA, priv, with("exp", nil)),
		"no project":         sign(jwt.SigningMethodEdDSA, priv, with("project_id", nil)),
		"no user":            sign(jwt.SigningMethodEdDSA, priv, with("sub", nil)),
		"no grant":           sign(jwt.SigningMethodEdDSA, priv, with("grant", nil)),
		"grant not a number": sign(jwt.SigningMethodEdDSA, priv, with("grant", "7")),
		"lives too long":     sign(jwt.SigningMethodEdDSA, priv, with("exp", now.Add(MaxTTL+time.Minute).Unix())),
		"HS256 login token":  sign(jwt.SigningMethodHS256, []byte(strings.Repeat("s", 32)), with("purpose", "login")),
		"HS256 with pub key": sign(jwt.SigningMethodHS256, []byte(pub), valid()),
		"alg none":           sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, valid()),
	}
	// A valid token with its payload swapped for another project's.
	good := sign(jwt.SigningMethodEdDSA, priv, valid())
	parts := strings.Split(good, ".")
	other := sign(jwt.SigningMethodEdDSA, priv, with("project_id", "other"))
	parts[1] = strings.Split(other, ".")[1]
	parts[2] = base64.RawURLEncoding.EncodeToString(make([]byte, ed25519.SignatureSize))
	cases["forged signature"] = strings.Join(parts, ".")
	cases["garbage"] = "not.a.token"
	for name, tok := range cases {
		_, err := Verify(keys, tok, now)
		assert.ErrorIs(t, err, ErrInvalid, name)
	}
}

func TestNoKeys(t *testing.T) {
	_, priv := keyPair(t)
	tok, err := Issue(priv, Claims{UserID: "u", ProjectID: "p", Grant: 7}, time.Minute, now)
	require.NoError(t, err)
	_, err = Verify(nil, tok, now)
	assert.True(t, errors.Is(err, ErrNoKeys))
	_, err = Verify([]ed25519.PublicKey{{1, 2, 3}}, tok, now)
	assert.True(t, errors.Is(err, ErrNoKeys))
}

func TestIssueRefuses(t *testing.T) {
	_, priv := keyPair(t)
	for name, f := range map[string]func() error{
		"no project": func() error { _, err := Issue(priv, Claims{UserID: "u"}, time.Minute, now); return err },
		"no user":    func() error { _, err := Issue(priv, Claims{ProjectID: "p"}, time.Minute, now); return err },
		"no grant":   func() error { _, err := Issue(priv, Claims{UserID: "u", ProjectID: "p"}, time.Minute, now); return err },
		"zero ttl":   func() error { _, err := Issue(priv, Claims{UserID: "u", ProjectID: "p", Grant: 7}, 0, now); return err },
		"long ttl": func() error {
			_, err := Issue(priv, Claims{UserID: "u", ProjectID: "p", Grant: 7}, 2*MaxTTL, now)
			return err
		},
		"bad key": func() error {
			_, err := Issue(priv[:10], Claims{UserID: "u", ProjectID: "p", Grant: 7}, time.Minute, now)
			return err
		},
	} {
		assert.Error(t, f(), name)
	}
}

func FuzzVerify(f *testing.F) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	good, err := Issue(priv, Claims{UserID: "u", ProjectID: "p", Grant: 7}, time.Minute, now)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{good, "", "a.b.c", "eyJhbGciOiJub25lIn0.e30.", good[:len(good)-2], strings.Replace(good, ".", "..", 1)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := Verify([]ed25519.PublicKey{pub}, tok, now)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		// Only a token this key signed passes, and it says what Issue put in.
		if c.UserID != "u" || c.ProjectID != "p" {
			t.Fatalf("accepted claims %+v from %q", c, tok)
		}
	})
}
