package api

import (
	"net/url"
	"testing"
)

// FuzzSSOCallback feeds the callback's query and the state cookie, both set by whoever
// sends the browser: an accepted cookie is exactly one encode made (so no other shape
// can stand for a login this browser started), and an accepted query has a code and
// state within the bounds, or the provider's error.
func FuzzSSOCallback(f *testing.F) {
	v := ssoState{State: randomValue(), Nonce: randomValue(), Verifier: randomValue()}.encode()
	f.Add(v, "code=abc&state=def")
	f.Add("v1.a.b.c", "error=access_denied&state=x")
	f.Add(v+".", "code=&state=")
	f.Add("", "code=%zz")
	f.Fuzz(func(t *testing.T, cookie, query string) {
		if st, ok := parseSSOState(cookie); ok {
			if st.encode() != cookie {
				t.Fatalf("accepted %q, which encodes as %q", cookie, st.encode())
			}
			for _, p := range []string{st.State, st.Nonce, st.Verifier} {
				if !isRandomValue(p) {
					t.Fatalf("accepted a value %q not of randomValue's shape", p)
				}
			}
		}
		q, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		cb, err := parseSSOCallback(q)
		if err != nil {
			return
		}
		if len(cb.Code) > maxCallbackParam || len(cb.State) > maxCallbackParam || len(cb.Error) > 64 {
			t.Fatalf("accepted an oversized callback %d/%d/%d", len(cb.Code), len(cb.State), len(cb.Error))
		}
		if cb.Error == "" && (cb.Code == "" || cb.State == "") {
			t.Fatalf("accepted a callback without code or state: %q", query)
		}
	})
}

func TestSSOStateRoundTrip(t *testing.T) {
	st := ssoState{State: randomValue(), Nonce: randomValue(), Verifier: randomValue()}
	got, ok := parseSSOState(st.encode())
	if !ok || got != st {
		t.Fatalf("parseSSOState(encode) = %+v, %v; want %+v", got, ok, st)
	}
	for _, bad := range []string{"", "v1", "v2." + st.State + "." + st.Nonce + "." + st.Verifier,
		"v1." + st.State + "." + st.Nonce, "v1." + st.State + "." + st.Nonce + "." + st.Verifier[1:] + "="} {
		if _, ok := parseSSOState(bad); ok {
			t.Errorf("accepted %q", bad)
		}
	}
}
