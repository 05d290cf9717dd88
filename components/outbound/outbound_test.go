package outbound

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestRefusesLocalServerWithoutAllowList(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()

	_, err := NewClient(Options{Timeout: 5 * time.Second}).Get(srv.URL)
	if !errors.Is(err, ErrForbiddenAddress) {
		t.Fatalf("err = %v, want ErrForbiddenAddress", err)
	}
	var fe *ForbiddenAddressError
	if !errors.As(err, &fe) || fe.Addr != netip.MustParseAddr("127.0.0.1") {
		t.Fatalf("err = %v, want a ForbiddenAddressError for 127.0.0.1", err)
	}
	want := "destination refused: 127.0.0.1 is a loopback address; allow it with SVC_OUTBOUND_ALLOW"
	if fe.Error() != want {
		t.Fatalf("message %q, want %q", fe.Error(), want)
	}

	allow, err := ParseAllow("127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := NewClient(Options{AllowCIDRs: allow, Timeout: 5 * time.Second}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); string(b) != "ok" {
		t.Fatalf("body %q", b)
	}
}

// A name passes any check made on the URL; only the connect-time check sees where it leads.
func TestRefusesHostnameResolvingToLoopbackAtConnect(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("the server was reached")
	}))
	defer srv.Close()
	u := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	if err := CheckURL(u); err != nil {
		t.Fatal(err)
	}
	_, err := NewClient(Options{Timeout: 5 * time.Second}).Get(u)
	if !errors.Is(err, ErrForbiddenAddress) {
		t.Fatalf("err = %v, want ErrForbiddenAddress", err)
	}
	if !strings.Contains(err.Error(), "is a loopback address") {
		t.Fatalf("err %q does not say why", err)
	}
}

func TestDoesNotFollowRedirects(t *testing.T) {
	var hits int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
	}))
	defer srv.Close()
	allow, _ := ParseAllow("127.0.0.1")
	resp, err := NewClient(Options{AllowCIDRs: allow}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || hits != 1 {
		t.Fatalf("status %d after %d hits, want the 302 itself", resp.StatusCode, hits)
	}
}

func TestCheckAddr(t *testing.T) {
	refused := map[string]string{
		"127.0.0.1":              "loopback",
		"127.255.0.9":            "loopback",
		"::1":                    "loopback",
		"::ffff:127.0.0.1":       "loopback",
		"10.1.2.3":               "private",
		"172.16.0.1":             "private",
		"172.31.255.255":         "private",
		"192.168.1.1":            "private",
		"::ffff:192.168.1.1":     "private",
		"fd12:3456::1":           "private",
		"fc00::1":                "private",
		"169.254.169.254":        "metadata",
		"::ffff:169.254.169.254": "metadata",
		"fd00:ec2::254":          "metadata",
		"169.254.1.1":            "link-local",
		"fe80::1":                "link-local",
		"fe80::1%eth0":           "link-local",
		"0.0.0.0":                "unspecified",
		"::":                     "unspecified",
		"224.0.0.1":              "multicast",
		"ff02::1":                "multicast",
		"100.64.0.1":             "CGNAT",
		"100.127.255.254":        "CGNAT",
		"255.255.255.255":        "broadcast",
		"64:ff9b::7f00:1":        "loopback",
		"64:ff9b::a9fe:a9fe":     "metadata",
	}
	for s, kind := range refused {
		err := CheckAddr(netip.MustParseAddr(s), nil)
		if !errors.Is(err, ErrForbiddenAddress) || !strings.Contains(err.Error(), kind) {
			t.Errorf("%s: %v, want refused as %s", s, err, kind)
		}
	}
	for _, s := range []string{"8.8.8.8", "1.1.1.1", "172.32.0.1", "100.128.0.1", "2606:4700::1111", "64:ff9b::808:808"} {
		if err := CheckAddr(netip.MustParseAddr(s), nil); err != nil {
			t.Errorf("%s refused: %v", s, err)
		}
	}
	allow, err := ParseAllow("127.0.0.0/8, 10.0.0.5, fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"127.0.0.1", "::ffff:127.0.0.2", "10.0.0.5", "fd00::1"} {
		if err := CheckAddr(netip.MustParseAddr(s), allow); err != nil {
			t.Errorf("%s refused although allowed: %v", s, err)
		}
	}
	for _, s := range []string{"10.0.0.6", "::1", "169.254.169.254"} {
		if err := CheckAddr(netip.MustParseAddr(s), allow); err == nil {
			t.Errorf("%s allowed although outside the allow list", s)
		}
	}
}

func TestParseAllow(t *testing.T) {
	got, err := ParseAllow(" 127.0.0.0/8 ,, 10.1.2.3,::1, 192.168.1.77/24, ::ffff:10.0.0.0/104 ")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"127.0.0.0/8", "10.1.2.3/32", "::1/128", "192.168.1.0/24", "10.0.0.0/8"}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("entry %d = %s, want %s", i, got[i], want[i])
		}
	}
	if got, err := ParseAllow(""); err != nil || len(got) != 0 {
		t.Fatalf("empty: %v %v", got, err)
	}
	_, err = ParseAllow("127.0.0.0/8,localhost,10.0.0.0/33,fe80::1%eth0")
	if err == nil {
		t.Fatal("bad entries accepted")
	}
	for _, bad := range []string{`"localhost"`, `"10.0.0.0/33"`, `"fe80::1%eth0"`, "SVC_OUTBOUND_ALLOW"} {
		if !strings.Contains(err.Error(), bad) {
			t.Errorf("error %q does not mention %s", err, bad)
		}
	}
}

func TestCheckURL(t *testing.T) {
	for _, ok := range []string{
		"https://agent.example.com/hook",
		"http://agent.example.com:8080/a?b=c",
		"https://10.0.0.1/x",
		"http://[::1]:9000/",
		"HTTPS://Agent.Example.com",
	} {
		if err := CheckURL(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for raw, want := range map[string]string{
		"":                                "empty",
		"   ":                             "empty",
		"agent.example.com/hook":          "no scheme",
		"ftp://agent.example.com":         `scheme "ftp" is not allowed`,
		"file:///etc/passwd":              `scheme "file" is not allowed`,
		"gopher://x":                      `scheme "gopher"`,
		"https://user:secret@example.com": "credentials",
		"https://token@example.com":       "credentials",
		"https:///path":                   "no host",
		"http:example.com":                "no host",
		"https://:8080/":                  "no host",
		"https://example.com:99999/":      "invalid port",
		"https://exa mple.com/":           "cannot be parsed",
		"http://[::1/":                    "cannot be parsed",
	} {
		err := CheckURL(raw)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckURL(%q) = %v, want an error about %q", raw, err, want)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("CheckURL(%q) echoes credentials: %v", raw, err)
		}
	}
}

func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{"https://agent.example.com/hook", "http://u:p@h/", "ftp://x", "http:x", "http://[::1]:0/", "https://h:65536"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if CheckURL(raw) != nil {
			return
		}
		// Whatever passes must be something the HTTP client can call, without credentials.
		req, err := http.NewRequest(http.MethodPost, raw, nil)
		if err != nil {
			t.Fatalf("accepted %q, but no request can be built: %v", raw, err)
		}
		if req.URL.User != nil || (req.URL.Scheme != "http" && req.URL.Scheme != "https") || req.URL.Hostname() == "" {
			t.Fatalf("accepted %q", raw)
		}
	})
}
