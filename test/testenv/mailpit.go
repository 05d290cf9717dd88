package testenv

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// Mailpit is a real SMTP server (github.com/axllent/mailpit, `make mailpit` builds the
// pinned version into bin/) on free loopback ports; tests read what it received through
// its HTTP API.
type Mailpit struct {
	SMTPPort int
	// API is its HTTP address, http://127.0.0.1:PORT.
	API string
	// User and Password are what it accepts for SMTP AUTH when started with them.
	User, Password string
	// CertFile is its self-signed certificate (PEM) when it speaks TLS, and CertPool
	// holds it: clients trust it through SSL_CERT_FILE or their own pool.
	CertFile    string
	CertPool    *x509.CertPool
	ImplicitTLS bool
	p           process
}

// MailpitOptions configure StartMailpit.
type MailpitOptions struct {
	// User and Password, when set, are the only SMTP credentials it accepts.
	User, Password string
	// STARTTLS makes it offer STARTTLS and refuse mail without it; ImplicitTLS makes it
	// speak TLS from the first byte (smtps).
	STARTTLS, ImplicitTLS bool
}

// MailpitBinary is bin/mailpit, else mailpit on PATH. Without it the test is skipped,
// except under CI=true, where `make test` has built it.
func MailpitBinary(t T) string {
	t.Helper()
	if p := filepath.Join(RepoRoot(), "bin", "mailpit"); fileExecutable(p) {
		return p
	}
	if p, err := exec.LookPath("mailpit"); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("mailpit is needed (CI=true: not skipped); `make mailpit` builds it into bin/")
	}
	if s, ok := t.(interface{ Skip(...any) }); ok {
		s.Skip("mailpit not in bin/ or PATH; `make mailpit` builds it")
	}
	t.Fatal("mailpit not in bin/ or PATH; `make mailpit` builds it")
	return ""
}

func fileExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// StartMailpit starts mailpit; it stops with the test.
func StartMailpit(t T, o MailpitOptions) *Mailpit {
	t.Helper()
	bin := MailpitBinary(t)
	m := &Mailpit{User: o.User, Password: o.Password, ImplicitTLS: o.ImplicitTLS}
	dir := t.TempDir()
	args := []string{"--database", filepath.Join(dir, "mailpit.db"), "--disable-version-check", "--quiet"}
	if o.STARTTLS || o.ImplicitTLS {
		m.CertFile, m.CertPool = selfSigned(t, dir)
		args = append(args, "--smtp-tls-cert", m.CertFile, "--smtp-tls-key", filepath.Join(dir, "key.pem"))
		if o.ImplicitTLS {
			args = append(args, "--smtp-require-tls")
		} else {
			args = append(args, "--smtp-require-starttls")
		}
	}
	if o.User != "" {
		hash, err := bcrypt.GenerateFromPassword([]byte(o.Password), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, "smtp-auth")
		if err := os.WriteFile(file, []byte(o.User+":"+string(hash)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--smtp-auth-file", file)
	}
	retryPorts(t, func() error {
		m.p.resetLog()
		m.SMTPPort = FreePort(t)
		httpPort := FreePort(t)
		m.API = "http://127.0.0.1:" + strconv.Itoa(httpPort)
		a := append(args, "--smtp", "127.0.0.1:"+strconv.Itoa(m.SMTPPort), "--listen", "127.0.0.1:"+strconv.Itoa(httpPort))
		if err := m.p.start(bin, a, nil); err != nil {
			return err
		}
		return m.p.waitReady("mailpit", 30*time.Second, 50*time.Millisecond, func() bool { return answers200(m.API + "/readyz") })
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		m.p.stop(ctx)
		if t.Failed() {
			t.Logf("mailpit log:\n%s", tail(m.p.Log(), 8<<10))
		}
	})
	return m
}

// SMTPURL is SVC_SMTP_URL for this server, with its credentials when it has some.
func (m *Mailpit) SMTPURL() string {
	scheme := "smtp"
	if m.ImplicitTLS {
		scheme = "smtps"
	}
	u := url.URL{Scheme: scheme, Host: "127.0.0.1:" + strconv.Itoa(m.SMTPPort)}
	if m.User != "" {
		u.User = url.UserPassword(m.User, m.Password)
	}
	return u.String()
}

// MailAddress is an address as mailpit's API shows it.
type MailAddress struct{ Name, Address string }

// Mail is a message mailpit received.
type Mail struct {
	ID       string
	From     MailAddress
	To       []MailAddress
	Subject  string
	Text     string
	HTML     string
	Username string // the SMTP AUTH user it came in with ("": none)
}

// Messages lists what arrived for the address, newest first (bodies not included).
func (m *Mailpit) Messages(t T, to string) []Mail {
	t.Helper()
	var out struct{ Messages []Mail }
	m.get(t, "/api/v1/search?query="+url.QueryEscape("to:"+strconv.Quote(to)), &out)
	return out.Messages
}

// Message reads one message with its bodies.
func (m *Mailpit) Message(t T, id string) Mail {
	t.Helper()
	var msg Mail
	m.get(t, "/api/v1/message/"+url.PathEscape(id), &msg)
	return msg
}

// WaitFor waits until n messages have arrived for the address whose subject contains
// subject, and returns the newest with its bodies.
func (m *Mailpit) WaitFor(t T, to, subject string, n int) Mail {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var match []Mail
		for _, msg := range m.Messages(t, to) {
			if strings.Contains(msg.Subject, subject) {
				match = append(match, msg)
			}
		}
		if len(match) >= n {
			full := m.Message(t, match[0].ID)
			full.Username = match[0].Username
			return full
		}
		if time.Now().After(deadline) {
			t.Fatalf("mailpit: %d message(s) to %s about %q within 15 s, want %d", len(match), to, subject, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (m *Mailpit) get(t T, path string, v any) {
	t.Helper()
	resp, err := http.Get(m.API + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("mailpit GET %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(fmt.Errorf("mailpit GET %s: %w", path, err))
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key under dir.
func selfSigned(t T, dir string) (string, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mailpit"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	certFile := filepath.Join(dir, "cert.pem")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	return certFile, pool
}
