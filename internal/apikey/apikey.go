// Package apikey makes and hashes API keys. Keys are 256 bits of randomness, so a plain
// SHA-256 is a safe one-way store (no salt or slow hash is needed for such entropy) and
// lets the data plane look a key up in memory by its hash.
package apikey

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
)

// Kinds of key, visible in the key's first characters so a leaked key can be recognised
// (and secret scanners can match it).
const (
	KindProject = "osk_" // project key: OTLP, events, agent output
	KindIngest  = "osi_" // ingest-scoped key of one push source
	KindAccess  = "osp_" // a user's personal access token, for the control plane's API and MCP
	// OAuth (the control plane's authorization server for MCP clients): an authorization
	// code, an access token good only at /mcp, and its refresh token.
	KindOAuthCode    = "oac_"
	KindOAuthAccess  = "oat_"
	KindOAuthRefresh = "ort_"
)

// PrefixLen is how much of a key is kept in clear to tell keys apart in listings.
const PrefixLen = 12

// Generate returns a new key of the given kind.
func Generate(kind string) string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return kind + base64.RawURLEncoding.EncodeToString(b[:])
}

// Hash is the stored form of a key: lowercase hex SHA-256.
func Hash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// Prefix is the part of a key shown in listings.
func Prefix(key string) string {
	if len(key) <= PrefixLen {
		return key
	}
	return key[:PrefixLen]
}

// LooksLike reports whether s has the shape of one of our keys; used only to give a
// clearer error, never to authenticate.
func LooksLike(s string) bool {
	return strings.HasPrefix(s, KindProject) || strings.HasPrefix(s, KindIngest)
}
