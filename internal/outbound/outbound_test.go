package outbound

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
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

// Every spelling of a refused address, and the IPv6 forms that carry an IPv4 address, are
// refused as what they are; the four families the security run found (6to4,
// IPv4-compatible, NAT64, IPv4-mapped) among them.
func TestHostFormsRefused(t *testing.T) {
	for host, want := range map[string]string{
		"169.254.169.254":      "169.254.169.254 is a cloud metadata address",
		"127.0.0.1":            "127.0.0.1 is a loopback address",
		"2130706433":           "127.0.0.1 is a loopback address",
		"0x7f000001":           "127.0.0.1 is a loopback address",
		"017700000001":         "127.0.0.1 is a loopback address",
		"0x7f.1":               "127.0.0.1 is a loopback address",
		"0177.0.0.1":           "127.0.0.1 is a loopback address",
		"127.1":                "127.0.0.1 is a loopback address",
		"127.0.0.1.":           "127.0.0.1 is a loopback address",
		"0X7F.0.0.1":           "127.0.0.1 is a loopback address",
		"0xa9.0xfe.0xa9.0xfe":  "169.254.169.254 is a cloud metadata address",
		"2852039166":           "169.254.169.254 is a cloud metadata address",
		"0":                    "0.0.0.0 is an unspecified",
		"[::1]":                "::1 is a loopback address",
		"[::ffff:127.0.0.1]":   "::ffff:127.0.0.1 is a loopback address",
		"[::ffff:a9fe:a9fe]":   "is a cloud metadata address",
		"[2002:a9fe:a9fe::1]":  "2002:a9fe:a9fe::1 is a cloud metadata address",
		"[2002:7f00:1::]":      "is a loopback address",
		"[::a9fe:a9fe]":        "::a9fe:a9fe is a cloud metadata address",
		"[::127.0.0.1]":        "is a loopback address",
		"[64:ff9b::a9fe:a9fe]": "64:ff9b::a9fe:a9fe is a cloud metadata address",
		"[64:ff9b::10.0.0.1]":  "is a private address",
		"[64:ff9b:1::1]":       "local-use NAT64",
		"198.18.0.1":           "benchmarking",
		"198.19.255.255":       "benchmarking",
		"192.0.0.8":            "IETF protocol assignment",
		"192.0.2.1":            "documentation",
		"198.51.100.7":         "documentation",
		"203.0.113.9":          "documentation",
		"[2001:db8::1]":        "documentation",
		"[2001::1]":            "IETF protocol assignment",
		"[100::1]":             "discard-only",
		"[fec0::1]":            "site-local",
		"[fe80::1%25eth0]":     "link-local",
		"192.88.99.1":          "6to4 relay",
		"168.63.129.16":        "cloud metadata",
		"10.0.0.1":             "private",
		"100.64.0.1":           "CGNAT",
		"255.255.255.255":      "broadcast",
		"[ff02::1]":            "multicast",
		"[fd00:ec2::254]":      "cloud metadata",
		"1.2.3.999":            "not a valid one",
		"1.2.3.4.5":            "not a valid one",
		"0x100.1.1.1":          "not a valid one",
		"example.4294967296":   "not a valid one",
	} {
		u, err := url.Parse("http://" + host + ":8080/hook")
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		err = CheckDestination(context.Background(), u.String(), nil, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want refused with %q", host, err, want)
		}
		if err != nil && !strings.Contains(err.Error(), "not a valid") && !strings.Contains(err.Error(), EnvAllow) {
			t.Errorf("%s: %q does not name %s", host, err, EnvAllow)
		}
	}
	for _, host := range []string{"8.8.8.8", "134744072", "[2606:4700::1111]", "[2002:808:808::1]", "[64:ff9b::808:808]", "[::ffff:8.8.8.8]", "1.1.1.1."} {
		if err := CheckDestination(context.Background(), "https://"+host+"/x", nil, nil); err != nil {
			t.Errorf("%s refused: %v", host, err)
		}
	}
	allow, _ := ParseAllow("127.0.0.0/8")
	for _, host := range []string{"127.0.0.1", "2130706433", "[::ffff:127.0.0.1]", "[64:ff9b::7f00:1]", "localhost"} {
		if err := CheckDestination(context.Background(), "http://"+host+"/", allow, nil); err != nil {
			t.Errorf("%s refused although %s allows it: %v", host, EnvAllow, err)
		}
	}
}

func TestParseHost(t *testing.T) {
	for host, want := range map[string]string{
		"2130706433": "127.0.0.1", "0x7f.1": "127.0.0.1", "0177.0.0.1": "127.0.0.1", "127.1": "127.0.0.1",
		"127.0.0.1.": "127.0.0.1", "127.0.1": "127.0.0.1", "0x": "0.0.0.0", "1.0x10.0300": "1.16.0.192",
		"4294967295": "255.255.255.255", "::1": "::1", "[::1]": "::1", "08.1.1.1": "",
	} {
		a, _, isAddr, err := ParseHost(host)
		switch {
		case want == "" && err == nil:
			t.Errorf("%s: %s accepted, want refused (8 is no octal digit)", host, a)
		case want != "" && (err != nil || !isAddr || a.String() != want):
			t.Errorf("%s: %s %v %v, want %s", host, a, isAddr, err, want)
		}
	}
	for host, want := range map[string]string{"Example.COM.": "example.com", "agent-1.example.com": "agent-1.example.com", "1.2.3.com": "1.2.3.com", "0x1g": "0x1g"} {
		_, name, isAddr, err := ParseHost(host)
		if err != nil || isAddr || name != want {
			t.Errorf("%s: name %q %v %v, want the name %q", host, name, isAddr, err, want)
		}
	}
}

// The client dials the address a numeric host means, never asks a resolver about it.
func TestClientNormalizesNumericHosts(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	defer srv.Close()
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	allow, _ := ParseAllow("127.0.0.0/8")
	for _, host := range []string{"2130706433", "0x7f.1", "0177.0.0.1", "127.1", "127.0.0.1."} {
		resp, err := NewClient(Options{AllowCIDRs: allow, Timeout: 5 * time.Second}).Get("http://" + host + ":" + port + "/")
		if err != nil {
			t.Errorf("%s with 127.0.0.0/8 allowed: %v", host, err)
			continue
		}
		resp.Body.Close()
		_, err = NewClient(Options{Timeout: 5 * time.Second}).Get("http://" + host + ":" + port + "/")
		var fe *ForbiddenAddressError
		if !errors.As(err, &fe) || fe.Addr != netip.MustParseAddr("127.0.0.1") {
			t.Errorf("%s without an allow list: %v, want refused as 127.0.0.1", host, err)
		}
	}
	_, err := NewClient(Options{AllowCIDRs: allow, Timeout: 5 * time.Second}).Get("http://1.2.3.999:" + port + "/")
	if !errors.Is(err, ErrForbiddenAddress) || !errors.Is(err, ErrInvalidHost) {
		t.Errorf("1.2.3.999: %v, want refused as an invalid numeric host", err)
	}
	for _, u := range []string{"http://[2002:a9fe:a9fe::1]:" + port + "/", "http://[::a9fe:a9fe]:" + port + "/", "http://[64:ff9b::a9fe:a9fe]:" + port + "/", "http://[::ffff:169.254.169.254]:" + port + "/", "http://198.18.0.1:" + port + "/", "http://192.0.0.1:" + port + "/"} {
		_, err := NewClient(Options{Timeout: 5 * time.Second}).Get(u)
		if !errors.Is(err, ErrForbiddenAddress) {
			t.Errorf("%s reached: %v", u, err)
		}
	}
}

func TestCheckDestinationNames(t *testing.T) {
	for _, u := range []string{"http://localhost:8080/", "http://LOCALHOST./x", "http://agent.localhost/"} {
		err := CheckDestination(context.Background(), u, nil, nil)
		if err == nil || !strings.Contains(err.Error(), "resolves to") || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("%s: %v, want refused as loopback", u, err)
		}
	}
	// RFC 6761: .invalid never resolves; a name that does not resolve yet is accepted.
	if err := CheckDestination(context.Background(), "https://agent.example.invalid/hook", nil, nil); err != nil {
		t.Errorf("unresolvable name refused: %v", err)
	}
	if err := CheckDestination(context.Background(), "https://user:pw@example.com/", nil, nil); err == nil || strings.Contains(err.Error(), "pw") {
		t.Errorf("credentials: %v", err)
	}
}

func FuzzParseHost(f *testing.F) {
	for _, s := range []string{"2130706433", "0x7f.1", "0177.0.0.1", "127.1", "127.0.0.1.", "[::1]", "::ffff:1.2.3.4", "example.com", "1.2.3.999", "0x", "..", "fe80::1%eth0", "1.2.3.com"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		a, name, isAddr, err := ParseHost(host)
		switch {
		case err != nil:
			if !errors.Is(err, ErrInvalidHost) || isAddr || name != "" {
				t.Fatalf("%q: error %v with %v %q", host, err, isAddr, name)
			}
		case isAddr:
			if !a.IsValid() || name != "" {
				t.Fatalf("%q: address %v, name %q", host, a, name)
			}
			// A dotted quad means itself.
			if p, err := netip.ParseAddr(host); err == nil && p != a {
				t.Fatalf("%q read as %s", host, a)
			}
		default:
			if name == "" || numericLabel(name[strings.LastIndexByte(name, '.')+1:]) {
				t.Fatalf("%q: a name %q that ends in a number", host, name)
			}
			if _, err := netip.ParseAddr(name); err == nil {
				t.Fatalf("%q: an address taken for the name %q", host, name)
			}
		}
	})
}
