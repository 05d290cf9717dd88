// Package requestid names agent calls so that the service can later tell, from a result's
// request id alone, whether it issued that id to the project posting the result.
//
// An id is "req_" + 24 hex of randomness + 8 hex of HMAC-SHA256(key, project|random),
// truncated to 4 bytes: still "req_" and 32 hex, the shape agents have always been sent.
// The key is one per deployment, kept in JetStream KV (bucket svc-request-id, key request-id),
// so every process issues and recognises the same ids.
//
// Why stateless: the obvious check, looking the id up in the delivery log, races with the
// agent. The agent can post its result before the log's asynchronous write of the call
// lands, so a real result would be marked unmatched now and then. The MAC needs no
// lookup, so it is right at any moment, on any process, and costs no storage.
//
// What an attacker gains by forging or learning ids: nothing. A request id is not a
// capability: a result is authenticated by the project's API key, and is accepted and
// delivered whether its id verifies or not (docs/contract.md#section-3). "Unmatched" is a signal
// to the project's owner that its agent posts under made-up or foreign ids, not a gate.
// Ids are bound to their project, so an id issued to project A is unmatched under B;
// a guessed tag passes one time in 2^32, which only hides one result from that signal.
package requestid

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
)

const (
	prefix    = "req_"
	randomHex = 24 // 12 bytes: unique enough per call (an agent deduplicates on the id)
	tagBytes  = 4
	// Len is the length of every id New returns.
	Len = len(prefix) + randomHex + 2*tagBytes
	// KeyBytes is the length of the deployment's key.
	KeyBytes = 32
)

// Issuer issues and verifies request ids with the deployment's key. It is safe for
// concurrent use.
type Issuer struct {
	key []byte
}

// NewIssuer returns an Issuer with key, which must be KeyBytes long. Processes get theirs
// from Load; this is for tests and tools that already hold the key.
func NewIssuer(key []byte) (*Issuer, error) {
	if len(key) != KeyBytes {
		return nil, errBadKey(len(key))
	}
	return &Issuer{key: append([]byte(nil), key...)}, nil
}

// String keeps the key out of logs and error messages that format an Issuer.
func (*Issuer) String() string { return "requestid.Issuer" }

// GoString is String for %#v.
func (i *Issuer) GoString() string { return i.String() }

// New returns a fresh id for a call made for project. It names the call, not an
// attempt: every retry carries it, so the agent can deduplicate.
func (i *Issuer) New(project string) string {
	var r [randomHex / 2]byte
	_, _ = rand.Read(r[:]) // never fails (crypto/rand panics rather than return short)
	random := hex.EncodeToString(r[:])
	return prefix + random + hex.EncodeToString(i.tag(project, random))
}

// Issued reports whether id is one that New returned for project (with this key). It
// compares the tag in constant time.
func (i *Issuer) Issued(project, id string) bool {
	if len(id) != Len || id[:len(prefix)] != prefix || !lowerHex(id[len(prefix):]) {
		return false
	}
	random, tag := id[len(prefix):len(prefix)+randomHex], id[len(prefix)+randomHex:]
	want := make([]byte, 2*tagBytes)
	hex.Encode(want, i.tag(project, random))
	return hmac.Equal(want, []byte(tag))
}

func (i *Issuer) tag(project, random string) []byte {
	m := hmac.New(sha256.New, i.key)
	// The separator keeps ("ab", "c…") and ("a", "bc…") apart; a project id holds no '|'.
	m.Write([]byte(project + "|" + random))
	return m.Sum(nil)[:tagBytes]
}

// lowerHex reports whether s is lowercase hex only: the form New writes. An id with
// another case was not sent by us as is, so it is not ours.
func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
