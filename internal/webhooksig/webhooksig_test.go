package webhooksig

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The example of the Standard Webhooks specification's reference libraries.
const (
	specSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	specID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	specTS     = 1614265330
	specBody   = `{"test": 2432232314}`
	specSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

// handMAC computes the signature without the package's helpers.
func handMAC(t *testing.T, secret, content string) string {
	t.Helper()
	k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	m := hmac.New(sha256.New, k)
	m.Write([]byte(content))
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func TestSignKnownVector(t *testing.T) {
	got, err := Sign(specSecret, specID, time.Unix(specTS, 0), []byte(specBody))
	if err != nil {
		t.Fatal(err)
	}
	if got != specSig {
		t.Fatalf("Sign = %s, want the specification's %s", got, specSig)
	}
	if hand := handMAC(t, specSecret, specID+".1614265330."+specBody); hand != got {
		t.Fatalf("Sign = %s, hand-computed %s", got, hand)
	}
}

func TestSignNewSecretMatchesHandComputation(t *testing.T) {
	s := NewSecret()
	if !strings.HasPrefix(s, "whsec_") {
		t.Fatalf("secret %q lacks the prefix", s)
	}
	k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
	if err != nil || len(k) != 32 {
		t.Fatalf("secret key: %d bytes, %v", len(k), err)
	}
	if s == NewSecret() {
		t.Fatal("two secrets are equal")
	}
	ts := time.Unix(1700000000, 123)
	got, err := Sign(s, "req_1", ts, []byte(`[{"a":1}]`))
	if err != nil {
		t.Fatal(err)
	}
	if want := handMAC(t, s, `req_1.1700000000.[{"a":1}]`); got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
}

func signed(t *testing.T, body string, ts time.Time) http.Header {
	t.Helper()
	h := http.Header{}
	if err := SetHeaders(h, specSecret, specID, ts, []byte(body)); err != nil {
		t.Fatal(err)
	}
	return h
}

func TestVerifyRoundTrip(t *testing.T) {
	now := time.Unix(specTS, 0)
	h := signed(t, specBody, now)
	if got := h.Get("Webhook-Signature"); got != specSig {
		t.Fatalf("header signature %s", got)
	}
	if err := Verify(specSecret, h, []byte(specBody), now.Add(time.Minute), 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	// Lowercase keys, as a hand-built map or an HTTP/2 framework may hold them.
	lower := http.Header{
		"webhook-id":        {specID},
		"webhook-timestamp": {"1614265330"},
		"webhook-signature": {specSig},
	}
	if err := Verify(specSecret, lower, []byte(specBody), now, 0); err != nil {
		t.Fatal(err)
	}
}

func TestVerifySeveralSignatures(t *testing.T) {
	now := time.Unix(specTS, 0)
	h := signed(t, specBody, now)
	other := handMAC(t, NewSecret(), "x")
	for _, v := range []string{
		other + " " + specSig,
		"v2,abc " + specSig,
		"v1,notbase64!! " + specSig,
		"  " + specSig + "  ",
		"v1a,xyz " + other + " " + specSig,
	} {
		h.Set(HeaderSignature, v)
		if err := Verify(specSecret, h, []byte(specBody), now, time.Minute); err != nil {
			t.Errorf("%q: %v", v, err)
		}
	}
}

func TestVerifyRejectsTampering(t *testing.T) {
	now := time.Unix(specTS, 0)
	body := []byte(specBody)
	cases := map[string]struct {
		secret string
		mutate func(h http.Header)
		body   []byte
		now    time.Time
		want   error
	}{
		"body changed":      {body: []byte(`{"test": 2432232315}`), want: ErrNoMatchingSig},
		"id changed":        {mutate: func(h http.Header) { h.Set(HeaderID, "msg_other") }, want: ErrNoMatchingSig},
		"timestamp changed": {mutate: func(h http.Header) { h.Set(HeaderTimestamp, "1614265331") }, want: ErrNoMatchingSig},
		"other secret":      {secret: NewSecret(), want: ErrNoMatchingSig},
		"signature flipped": {mutate: func(h http.Header) { h.Set(HeaderSignature, flip(specSig)) }, want: ErrNoMatchingSig},
		"only other versions": {
			mutate: func(h http.Header) { h.Set(HeaderSignature, "v1a,"+strings.TrimPrefix(specSig, "v1,")) },
			want:   ErrNoMatchingSig,
		},
		"no version":           {mutate: func(h http.Header) { h.Set(HeaderSignature, "abcdef") }, want: ErrMalformedSigValue},
		"missing id":           {mutate: func(h http.Header) { h.Del(HeaderID) }, want: ErrMissingHeader},
		"missing timestamp":    {mutate: func(h http.Header) { h.Del(HeaderTimestamp) }, want: ErrMissingHeader},
		"missing signature":    {mutate: func(h http.Header) { h.Del(HeaderSignature) }, want: ErrMissingHeader},
		"timestamp not digits": {mutate: func(h http.Header) { h.Set(HeaderTimestamp, "+1614265330") }, want: ErrInvalidTimestamp},
		"timestamp negative":   {mutate: func(h http.Header) { h.Set(HeaderTimestamp, "-5") }, want: ErrInvalidTimestamp},
		"timestamp huge":       {mutate: func(h http.Header) { h.Set(HeaderTimestamp, "99999999999999999999") }, want: ErrInvalidTimestamp},
		"too old":              {now: now.Add(6 * time.Minute), want: ErrTimestampTooOld},
		"too new":              {now: now.Add(-6 * time.Minute), want: ErrTimestampTooNew},
		"bad secret":           {secret: "whsec_!!!", want: ErrInvalidSecret},
		"empty secret":         {secret: "whsec_", want: ErrInvalidSecret},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			h := signed(t, specBody, now)
			if c.mutate != nil {
				c.mutate(h)
			}
			secret, b, at := specSecret, body, now
			if c.secret != "" {
				secret = c.secret
			}
			if c.body != nil {
				b = c.body
			}
			if !c.now.IsZero() {
				at = c.now
			}
			err := Verify(secret, h, b, at, 5*time.Minute)
			if !errors.Is(err, c.want) {
				t.Fatalf("Verify = %v, want %v", err, c.want)
			}
		})
	}
}

func TestVerifyErrorsAreClear(t *testing.T) {
	now := time.Unix(specTS, 0)
	h := signed(t, specBody, now)
	h.Del(HeaderID)
	h.Del(HeaderSignature)
	err := Verify(specSecret, h, []byte(specBody), now, time.Minute)
	if err == nil || !strings.Contains(err.Error(), "webhook-id, webhook-signature") {
		t.Fatalf("error does not name the missing headers: %v", err)
	}
	h = signed(t, specBody, now)
	err = Verify(specSecret, h, []byte(specBody), now.Add(time.Hour), time.Minute)
	if err == nil || !strings.Contains(err.Error(), "more than 1m0s before now") {
		t.Fatalf("error does not say how old: %v", err)
	}
}

func TestSecretValidation(t *testing.T) {
	for _, s := range []string{"", "whsec_", "whsec_***", "whsec_AAAA====="} {
		if _, err := Sign(s, "id", time.Now(), nil); !errors.Is(err, ErrInvalidSecret) {
			t.Errorf("Sign(%q) = %v, want ErrInvalidSecret", s, err)
		}
		if ValidateSecret(s) == nil {
			t.Errorf("ValidateSecret(%q) accepted", s)
		}
	}
	// Without the prefix, as the reference libraries accept it.
	if err := ValidateSecret(strings.TrimPrefix(specSecret, "whsec_")); err != nil {
		t.Fatal(err)
	}
}

func flip(sig string) string {
	b, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(sig, "v1,"))
	b[0] ^= 1
	return "v1," + base64.StdEncoding.EncodeToString(b)
}

func FuzzVerifyHeaders(f *testing.F) {
	f.Add(specID, "1614265330", specSig)
	f.Add(specID, "1614265330", "v1,abc v2,def "+specSig)
	f.Add("", "", "")
	f.Add("x", "-1", "v1,")
	f.Add("x", "00000000001614265330", ",,, v1")
	now := time.Unix(specTS, 0)
	f.Fuzz(func(t *testing.T, id, ts, sig string) {
		h := http.Header{}
		h.Set(HeaderID, id)
		h.Set(HeaderTimestamp, ts)
		h.Set(HeaderSignature, sig)
		err := Verify(specSecret, h, []byte(specBody), now, 5*time.Minute)
		if err == nil {
			// Only the genuine signature of these exact id and timestamp may pass.
			want := handMAC(t, specSecret, id+"."+ts+"."+specBody)
			if !containsSig(sig, want) {
				t.Fatalf("accepted id=%q ts=%q sig=%q", id, ts, sig)
			}
		}
	})
}

// containsSig compares decoded bytes: base64 has several spellings of the same bytes.
func containsSig(v, want string) bool {
	w, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(want, "v1,"))
	for _, f := range strings.Fields(v) {
		b64, ok := strings.CutPrefix(f, "v1,")
		if !ok {
			continue
		}
		if b, err := base64.StdEncoding.DecodeString(b64); err == nil && hmac.Equal(b, w) {
			return true
		}
	}
	return false
}
