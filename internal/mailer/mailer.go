// Package mailer sends the control plane's email through any SMTP server: SVC_SMTP_URL
// (smtp://user:pass@host:port, STARTTLS required; smtps://... for implicit TLS) from
// SVC_SMTP_FROM. SMTP itself is github.com/wneessen/go-mail's.
package mailer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/url"
	"strconv"
	"strings"
	"time"

	gomail "github.com/wneessen/go-mail"
)

// Env names the settings.
const (
	EnvURL  = "SVC_SMTP_URL"
	EnvFrom = "SVC_SMTP_FROM"
)

// Config is a parsed SVC_SMTP_URL and SVC_SMTP_FROM.
type Config struct {
	Host               string
	Port               int
	Username, Password string
	// ImplicitTLS is smtps: TLS from the first byte. Otherwise StartTLS says whether
	// the connection is upgraded.
	ImplicitTLS bool
	StartTLS    StartTLS
	From        string
	// RootCAs verify the server's certificate (nil: the system's, which SSL_CERT_FILE
	// can point elsewhere).
	RootCAs *x509.CertPool
}

// StartTLS is how an smtp:// connection gets TLS.
type StartTLS int

const (
	// StartTLSRequired refuses a server that does not offer STARTTLS: anyone on the
	// path can strip the offer, and the mailed links (password resets, invitations)
	// would then go out in clear.
	StartTLSRequired StartTLS = iota
	// StartTLSOpportunistic (?starttls=opportunistic, and the default for a loopback
	// host, where there is no path to strip it on) upgrades when offered.
	StartTLSOpportunistic
	// StartTLSOff (?starttls=off) never upgrades.
	StartTLSOff
)

// Parse reads the settings; an empty rawURL is no email (a zero Config, nil error).
func Parse(rawURL, from string) (Config, error) {
	var c Config
	if rawURL == "" {
		return c, nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		// url's error repeats the URL, password included.
		return c, fmt.Errorf("%s: not a URL such as smtp://user:pass@mail.example.com:587", EnvURL)
	}
	switch u.Scheme {
	case "smtp":
		c.Port = 587
	case "smtps":
		c.Port, c.ImplicitTLS = 465, true
	default:
		return c, fmt.Errorf("%s: the scheme must be smtp:// (STARTTLS when offered) or smtps:// (TLS), got %q", EnvURL, u.Scheme)
	}
	if u.Path != "" && u.Path != "/" || u.Fragment != "" || u.Opaque != "" {
		return c, fmt.Errorf("%s: want only smtp://user:pass@host:port[?starttls=opportunistic|off], without path", EnvURL)
	}
	c.Host = u.Hostname()
	if c.Host == "" {
		return c, fmt.Errorf("%s: the server's host is missing", EnvURL)
	}
	if isLoopback(c.Host) {
		c.StartTLS = StartTLSOpportunistic
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return c, fmt.Errorf("%s: the query must be ?starttls=opportunistic or ?starttls=off", EnvURL)
	}
	for k, v := range q {
		if k != "starttls" || len(v) != 1 {
			return c, fmt.Errorf("%s: the only query parameter is starttls (opportunistic or off), once", EnvURL)
		}
		if c.ImplicitTLS {
			return c, fmt.Errorf("%s: starttls does not apply to smtps:// (TLS from the first byte)", EnvURL)
		}
		switch v[0] {
		case "required":
			c.StartTLS = StartTLSRequired
		case "opportunistic":
			c.StartTLS = StartTLSOpportunistic
		case "off":
			c.StartTLS = StartTLSOff
		default:
			return c, fmt.Errorf("%s: starttls must be required, opportunistic or off", EnvURL)
		}
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return c, fmt.Errorf("%s: the port must be 1 to 65535", EnvURL)
		}
		c.Port = n
	}
	if u.User != nil {
		c.Username = u.User.Username()
		c.Password, _ = u.User.Password()
		// Without TLS every AUTH mechanism the server may offer gives the password away,
		// in clear (PLAIN, LOGIN) or as material for offline cracking (CRAM-MD5, NTLM,
		// SCRAM): credentials go only where TLS is certain or there is no path.
		if c.StartTLS != StartTLSRequired && !c.ImplicitTLS && !isLoopback(c.Host) {
			return c, fmt.Errorf("%s: a user and password are sent only over TLS: drop ?starttls=, or use smtps://", EnvURL)
		}
	}
	if from == "" {
		return c, fmt.Errorf("%s: set the sender address too, such as %s=\"otelcol-svc <noreply@example.com>\"", EnvFrom, EnvFrom)
	}
	a, err := mail.ParseAddress(from)
	if err != nil {
		return c, fmt.Errorf("%s: %q is not an address such as noreply@example.com", EnvFrom, from)
	}
	c.From = a.String()
	return c, nil
}

// isLoopback is a literal loopback address or localhost: the mail never leaves the
// machine, so there is no one on the path to strip STARTTLS.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Server names the server for logs, without the credentials.
func (c Config) Server() string {
	scheme := "smtp"
	if c.ImplicitTLS {
		scheme = "smtps"
	}
	return scheme + "://" + net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
}

// Message is one email, in plain text and HTML.
type Message struct {
	To, Subject, Text, HTML string
}

// Mailer sends messages; a nil *Mailer is "email is not configured".
type Mailer struct {
	cfg Config
	// Timeout bounds one delivery (connect, TLS, auth, send).
	Timeout time.Duration
}

// New returns the mailer of cfg, nil when cfg is zero (no SVC_SMTP_URL).
func New(cfg Config) *Mailer {
	if cfg.Host == "" {
		return nil
	}
	return &Mailer{cfg: cfg, Timeout: 15 * time.Second}
}

// ErrNotConfigured is Send's answer on a nil Mailer.
var ErrNotConfigured = errors.New("email is not configured: set " + EnvURL + " and " + EnvFrom)

// Send delivers m. Errors name the server, never the credentials or the message body.
func (m *Mailer) Send(ctx context.Context, msg Message) error {
	if m == nil {
		return ErrNotConfigured
	}
	gm := gomail.NewMsg()
	if err := gm.From(m.cfg.From); err != nil {
		return fmt.Errorf("sender: %w", err)
	}
	if err := gm.To(msg.To); err != nil {
		return fmt.Errorf("recipient: %w", err)
	}
	gm.Subject(msg.Subject)
	gm.SetBodyString(gomail.TypeTextPlain, msg.Text)
	if msg.HTML != "" {
		gm.AddAlternativeString(gomail.TypeTextHTML, msg.HTML)
	}
	opts := []gomail.Option{gomail.WithPort(m.cfg.Port), gomail.WithTimeout(m.Timeout),
		gomail.WithTLSConfig(&tls.Config{ServerName: m.cfg.Host, RootCAs: m.cfg.RootCAs, MinVersion: tls.VersionTLS12})}
	switch {
	case m.cfg.ImplicitTLS:
		opts = append(opts, gomail.WithSSL())
	case m.cfg.StartTLS == StartTLSOpportunistic:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSOpportunistic))
	case m.cfg.StartTLS == StartTLSOff:
		opts = append(opts, gomail.WithTLSPolicy(gomail.NoTLS))
	default:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	}
	if m.cfg.Username != "" {
		// The strongest mechanism the server offers. Parse lets credentials go without
		// certain TLS only to a loopback host.
		opts = append(opts, gomail.WithSMTPAuth(gomail.SMTPAuthAutoDiscover),
			gomail.WithUsername(m.cfg.Username), gomail.WithPassword(m.cfg.Password))
	}
	// A client per message: go-mail's Client holds one connection's state, and the
	// control plane sends a few messages an hour, not a stream.
	c, err := gomail.NewClient(m.cfg.Host, opts...)
	if err != nil {
		return fmt.Errorf("smtp %s: %w", m.cfg.Server(), err)
	}
	ctx, cancel := context.WithTimeout(ctx, m.Timeout)
	defer cancel()
	if err := c.DialAndSendWithContext(ctx, gm); err != nil {
		return fmt.Errorf("smtp %s: %s", m.cfg.Server(), redact(err.Error(), m.cfg.Password))
	}
	return nil
}

// redact keeps a server's error that echoes the password out of logs.
func redact(s, secret string) string {
	if secret == "" {
		return s
	}
	return strings.ReplaceAll(s, secret, "[redacted]")
}
