// Package webhooksig signs and verifies HTTP calls the Standard Webhooks way
// (https://www.standardwebhooks.com), so that an agent or webhook on a public URL can tell
// our calls from forged ones with any Standard Webhooks library:
//
//	webhook-id:        a unique id of the message, the same on every retry
//	webhook-timestamp: unix seconds of the attempt
//	webhook-signature: v1,<base64 HMAC-SHA256(key, id + "." + timestamp + "." + body)>
//
// The key is the base64 part of the secret after its "whsec_" prefix.
package webhooksig

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix starts every secret we issue.
const SecretPrefix = "whsec_"

// DefaultTolerance is how far a timestamp may be from the verifier's clock when Verify is
// given no tolerance: the replay window the Standard Webhooks libraries use.
const DefaultTolerance = 5 * time.Minute

// signatureVersion is the only scheme defined for symmetric keys.
const signatureVersion = "v1"

// Verification failures, so callers can tell them apart with errors.Is.
var (
	ErrInvalidSecret     = errors.New("webhook secret is not valid")
	ErrMissingHeader     = errors.New("webhook signature header missing")
	ErrInvalidTimestamp  = errors.New("webhook timestamp is not valid")
	ErrTimestampTooOld   = errors.New("webhook timestamp is too old")
	ErrTimestampTooNew   = errors.New("webhook timestamp is too far in the future")
	ErrNoMatchingSig     = errors.New("no webhook signature matches")
	ErrMalformedSigValue = errors.New("webhook signature header is malformed")
)

// NewSecret returns a new secret: "whsec_" and 32 random bytes in base64.
func NewSecret() string {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		// crypto/rand does not fail on supported platforms; a secret from a broken
		// source must never be handed out.
		panic("webhooksig: crypto/rand: " + err.Error())
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(key)
}

// ValidateSecret reports whether secret can sign: "whsec_" and non-empty base64.
func ValidateSecret(secret string) error {
	_, err := key(secret)
	return err
}

// key decodes the HMAC key of a secret. The prefix is optional on input, as in the
// reference libraries, so secrets pasted without it keep working.
func key(secret string) ([]byte, error) {
	b64 := strings.TrimPrefix(secret, SecretPrefix)
	if b64 == "" {
		return nil, fmt.Errorf("%w: it is empty; expected %q followed by base64", ErrInvalidSecret, SecretPrefix)
	}
	k, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("%w: the part after %q is not standard base64", ErrInvalidSecret, SecretPrefix)
	}
	if len(k) == 0 {
		return nil, fmt.Errorf("%w: the key is empty", ErrInvalidSecret)
	}
	return k, nil
}

func mac(k []byte, id, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, k)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Sign returns the webhook-signature value for one attempt.
func Sign(secret, id string, ts time.Time, body []byte) (string, error) {
	k, err := key(secret)
	if err != nil {
		return "", err
	}
	return signatureVersion + "," + base64.StdEncoding.EncodeToString(mac(k, id, unix(ts), body)), nil
}

// SetHeaders sets the three Standard Webhooks headers on h.
func SetHeaders(h http.Header, secret, id string, ts time.Time, body []byte) error {
	sig, err := Sign(secret, id, ts, body)
	if err != nil {
		return err
	}
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, unix(ts))
	h.Set(HeaderSignature, sig)
	return nil
}

func unix(ts time.Time) string { return strconv.FormatInt(ts.Unix(), 10) }

// Verify checks a received call: the id and timestamp headers are present, the timestamp
// is within tolerance of now (DefaultTolerance when tolerance <= 0), and one of the
// space-separated v1 signatures matches the body. Signatures of other versions are skipped,
// so a sender can add schemes without breaking verifiers.
func Verify(secret string, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	k, err := key(secret)
	if err != nil {
		return err
	}
	id, ts, sigs, err := readHeaders(h)
	if err != nil {
		return err
	}
	if err := checkTimestamp(ts, now, tolerance); err != nil {
		return err
	}
	candidates, err := parseSignatures(sigs)
	if err != nil {
		return err
	}
	want := mac(k, id, ts, body)
	for _, c := range candidates {
		if hmac.Equal(c, want) {
			return nil
		}
	}
	return ErrNoMatchingSig
}

// header reads a header by its canonical or its lowercase key: a header map built by hand
// (or by a framework that keeps HTTP/2's lowercase names) may not be canonical.
func header(h http.Header, name string) string {
	if v := h.Get(name); v != "" {
		return v
	}
	if vs := h[name]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

func readHeaders(h http.Header) (id, ts, sigs string, err error) {
	id, ts, sigs = header(h, HeaderID), header(h, HeaderTimestamp), header(h, HeaderSignature)
	var missing []string
	for _, p := range [][2]string{{HeaderID, id}, {HeaderTimestamp, ts}, {HeaderSignature, sigs}} {
		if p[1] == "" {
			missing = append(missing, p[0])
		}
	}
	if len(missing) > 0 {
		return "", "", "", fmt.Errorf("%w: %s", ErrMissingHeader, strings.Join(missing, ", "))
	}
	return id, ts, sigs, nil
}

func checkTimestamp(ts string, now time.Time, tolerance time.Duration) error {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	// Digits only: ParseInt alone would also take "+123" and "-1".
	if len(ts) > 12 || strings.TrimLeft(ts, "0123456789") != "" {
		return fmt.Errorf("%w: %q is not unix seconds", ErrInvalidTimestamp, ts)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %q is not unix seconds", ErrInvalidTimestamp, ts)
	}
	at := time.Unix(sec, 0)
	switch {
	case at.Before(now.Add(-tolerance)):
		return fmt.Errorf("%w: %s, more than %s before now", ErrTimestampTooOld, at.UTC().Format(time.RFC3339), tolerance)
	case at.After(now.Add(tolerance)):
		return fmt.Errorf("%w: %s, more than %s after now", ErrTimestampTooNew, at.UTC().Format(time.RFC3339), tolerance)
	}
	return nil
}

// maxSignatures bounds the work one forged header can cause.
const maxSignatures = 16

// parseSignatures returns the decoded v1 signatures of a webhook-signature value.
func parseSignatures(v string) ([][]byte, error) {
	var out [][]byte
	fields := strings.Fields(v)
	if len(fields) > maxSignatures {
		return nil, fmt.Errorf("%w: more than %d signatures", ErrMalformedSigValue, maxSignatures)
	}
	for _, f := range fields {
		version, sig, ok := strings.Cut(f, ",")
		if !ok {
			return nil, fmt.Errorf("%w: %q is not <version>,<base64>", ErrMalformedSigValue, truncate(f))
		}
		if version != signatureVersion {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(sig)
		if err != nil || len(b) != sha256.Size {
			// A malformed candidate never matches; keep looking at the others.
			continue
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		return nil, ErrNoMatchingSig
	}
	return out, nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
