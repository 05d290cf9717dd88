package sourceverify

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	stdhash "hash"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The fuzz target's fixed sources, one per scheme. Their secrets must never show up in an
// error message.
var (
	fuzzNow     = time.Unix(1_700_000_000, 0)
	fuzzKey     = []byte("fuzz-key-0123456789abcde")
	fuzzConfigs = map[string]Config{
		SchemeGitHub:           {Scheme: SchemeGitHub, Secret: "fuzz-secret-github-0123456789"},
		SchemeStripe:           {Scheme: SchemeStripe, Secret: "whsec_fuzz-secret-stripe-0123"},
		SchemeStandardWebhooks: {Scheme: SchemeStandardWebhooks, Secret: "whsec_" + base64.StdEncoding.EncodeToString(fuzzKey)},
		SchemeSentry:           {Scheme: SchemeSentry, Secret: "fuzz-secret-sentry-0123456789"},
		SchemePagerDuty:        {Scheme: SchemePagerDuty, Secret: "fuzz-secret-pagerduty-01234567"},
		SchemeSlack:            {Scheme: SchemeSlack, Secret: "fuzz-secret-slack-0123456789"},
		SchemeHMAC:             {Scheme: SchemeHMAC, Secret: "fuzz-secret-hmac-0123456789", Header: "X-Signature", Algorithm: "sha512", Prefix: "sha512="},
		SchemeBasic:            {Scheme: SchemeBasic, Username: "fuzz", Password: "fuzz-password-0123456789"},
		SchemeURLToken:         {Scheme: SchemeURLToken, Secret: "fuzz-token_0123456789"},
	}
)

// fuzzRequest puts the fuzzer's signature and timestamp where scheme reads them.
func fuzzRequest(scheme, sig, ts string) (http.Header, string) {
	h := http.Header{}
	set := func(k, v string) {
		if v != "" {
			h.Set(k, v)
		}
	}
	switch scheme {
	case SchemeGitHub:
		set(headerGitHub, sig)
	case SchemeStripe:
		set(headerStripe, sig)
	case SchemeStandardWebhooks:
		set("webhook-id", "msg_fuzz")
		set("webhook-timestamp", ts)
		set("webhook-signature", sig)
	case SchemeSentry:
		set(headerSentry, sig)
	case SchemePagerDuty:
		set(headerPagerDuty, sig)
	case SchemeSlack:
		set(headerSlack, sig)
		set(headerSlackTS, ts)
	case SchemeHMAC:
		set("X-Signature", sig)
	case SchemeBasic:
		set("Authorization", sig)
	case SchemeURLToken:
		return h, sig
	}
	return h, ""
}

func refMAC(newHash func() stdhash.Hash, key string, msg ...string) string {
	m := hmac.New(newHash, []byte(key))
	for _, p := range msg {
		m.Write([]byte(p))
	}
	return hex.EncodeToString(m.Sum(nil))
}

func within(ts string) bool {
	if ts == "" || strings.Trim(ts, "0123456789") != "" || len(ts) > 12 {
		return false
	}
	sec, _ := strconv.ParseInt(ts, 10, 64)
	d := fuzzNow.Unix() - sec
	return d <= 300 && d >= -300
}

// genuine is an independent, plain statement of when each scheme's request is authentic:
// whatever Verify accepts must be genuine by it, so the fuzzer looks for forgeries.
func genuine(scheme, sig, ts string, body []byte) bool {
	c := fuzzConfigs[scheme]
	b := string(body)
	sha := sha256.New
	switch scheme {
	case SchemeGitHub:
		return strings.HasPrefix(sig, "sha256=") && strings.EqualFold(sig[7:], refMAC(sha, c.Secret, b))
	case SchemeSentry:
		return strings.EqualFold(strings.TrimSpace(sig), refMAC(sha, c.Secret, b))
	case SchemePagerDuty:
		for _, el := range strings.Split(sig, ",") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(el), "v1="); ok && strings.EqualFold(v, refMAC(sha, c.Secret, b)) {
				return true
			}
		}
	case SchemeSlack:
		return within(ts) && strings.HasPrefix(sig, "v0=") && strings.EqualFold(sig[3:], refMAC(sha, c.Secret, "v0:"+ts+":", b))
	case SchemeStripe:
		var t string
		for _, el := range strings.Split(sig, ",") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(el), "t="); ok {
				t = v
			}
		}
		if !within(t) {
			return false
		}
		for _, el := range strings.Split(sig, ",") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(el), "v1="); ok && strings.EqualFold(v, refMAC(sha, c.Secret, t, ".", b)) {
				return true
			}
		}
	case SchemeStandardWebhooks:
		if !within(ts) {
			return false
		}
		want, _ := hex.DecodeString(refMAC(sha, string(fuzzKey), "msg_fuzz.", ts, ".", b))
		for _, f := range strings.Fields(sig) {
			if v, ok := strings.CutPrefix(f, "v1,"); ok {
				if got, err := base64.StdEncoding.DecodeString(v); err == nil && bytes.Equal(got, want) {
					return true
				}
			}
		}
	case SchemeHMAC:
		v := strings.TrimSpace(sig)
		return len(v) > 7 && strings.EqualFold(v[:7], "sha512=") &&
			strings.EqualFold(v[7:], refMAC(sha512.New, c.Secret, b))
	case SchemeBasic:
		if len(sig) < 6 || !strings.EqualFold(sig[:6], "basic ") {
			return false
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(sig[6:]))
		return err == nil && string(raw) == c.Username+":"+c.Password
	case SchemeURLToken:
		return sig == c.Secret
	}
	return false
}

// FuzzVerify feeds every scheme's parser arbitrary signature headers, timestamps and
// bodies (the seeds in testdata/fuzz/FuzzVerify are genuine requests of each scheme and
// some near misses). Verify must not panic, must answer nil or an *Error whose message
// holds no secret, and must accept what genuine accepts and nothing else.
func FuzzVerify(f *testing.F) {
	f.Fuzz(func(t *testing.T, scheme, sig, ts string, body []byte) {
		c, known := fuzzConfigs[scheme]
		if !known {
			c = Config{Scheme: scheme, Secret: "fuzz-secret-unknown-0123456789"}
		}
		h, token := fuzzRequest(scheme, sig, ts)
		err := Verify(c, h, token, body, fuzzNow)
		if err == nil {
			if !known || !genuine(scheme, sig, ts, body) {
				t.Fatalf("accepted a request that is not genuine: scheme %q, signature %q, timestamp %q, body %q", scheme, sig, ts, body)
			}
			return
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("%T is not *Error: %v", err, err)
		}
		// The other way round too, but for the bounds on header size and entry count,
		// which refuse even a genuine signature among too many.
		if known && e.Reason != ReasonMalformed && genuine(scheme, sig, ts, body) {
			t.Fatalf("refused a genuine request (%v): scheme %q, signature %q, timestamp %q, body %q", err, scheme, sig, ts, body)
		}
		if !known && e.Reason != ReasonConfig {
			t.Fatalf("scheme %q is not known, yet the failure is %q: %v", scheme, e.Reason, err)
		}
		for _, fc := range fuzzConfigs {
			for _, s := range []string{fc.Secret, fc.Password, strings.TrimPrefix(fc.Secret, "whsec_")} {
				// A secret the fuzzer itself sent may come back quoted; ours must not.
				if s != "" && strings.Contains(err.Error(), s) && !strings.Contains(scheme+sig+ts+string(body), s) {
					t.Fatalf("the error message holds a secret: %v", err)
				}
			}
		}
		if e.Error() == "" {
			t.Fatal("empty error message")
		}
	})
}
