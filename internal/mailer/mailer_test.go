package mailer

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

func TestParse(t *testing.T) {
	c, err := Parse("", "")
	require.NoError(t, err)
	assert.Nil(t, New(c), "no SVC_SMTP_URL: no mailer")

	c, err = Parse("smtp://ops%40example.com:s3cr%3At@mail.example.com", "Ops <noreply@example.com>")
	require.NoError(t, err)
	assert.Equal(t, Config{Host: "mail.example.com", Port: 587, Username: "ops@example.com", Password: "s3cr:t",
		From: `"Ops" <noreply@example.com>`, StartTLS: StartTLSRequired}, c)
	assert.Equal(t, "smtp://mail.example.com:587", c.Server())

	c, err = Parse("smtps://u:p@mail.example.com:2465", "noreply@example.com")
	require.NoError(t, err)
	assert.True(t, c.ImplicitTLS)
	assert.Equal(t, 2465, c.Port)

	for _, c := range []struct{ raw, from, want string }{
		{"http://mail.example.com", "noreply@example.com", "scheme must be smtp://"},
		{"smtp://:25", "noreply@example.com", "host is missing"},
		{"smtp://mail.example.com:0", "noreply@example.com", "port must be"},
		{"smtp://mail.example.com/x", "noreply@example.com", "without path"},
		{"smtp://mail.example.com?y=1", "noreply@example.com", "only query parameter is starttls"},
		{"smtp://mail.example.com?starttls=maybe", "noreply@example.com", "starttls must be"},
		{"smtps://mail.example.com?starttls=off", "noreply@example.com", "does not apply to smtps"},
		{"smtp://u:hunter2@mail.example.com?starttls=off", "noreply@example.com", "only over TLS"},
		{"smtp://u:hunter2@mail.example.com?starttls=opportunistic", "noreply@example.com", "only over TLS"},
		{"smtp://u:hunter2@%zz", "noreply@example.com", "not a URL"},
		{"smtp://u:hunter2@mail.example.com", "", "SVC_SMTP_FROM"},
	} {
		_, err := Parse(c.raw, c.from)
		require.Error(t, err, c.raw)
		assert.Contains(t, err.Error(), c.want, c.raw)
		assert.NotContains(t, err.Error(), "hunter2", "errors never carry the password")
	}
	for raw, want := range map[string]StartTLS{
		"smtp://mail.example.com":                           StartTLSRequired,
		"smtp://mail.example.com?starttls=opportunistic":    StartTLSOpportunistic,
		"smtp://mail.example.com?starttls=off":              StartTLSOff,
		"smtp://127.0.0.1:1025":                             StartTLSOpportunistic,
		"smtp://u:p@localhost:1025":                         StartTLSOpportunistic,
		"smtp://u:p@[::1]:1025?starttls=required":           StartTLSRequired,
		"smtp://u:p@mail.example.com:587?starttls=required": StartTLSRequired,
	} {
		c, err := Parse(raw, "noreply@example.com")
		require.NoError(t, err, raw)
		assert.Equal(t, want, c.StartTLS, raw)
	}
	_, err = Parse("smtp://mail.example.com", "not an address")
	assert.ErrorContains(t, err, "SVC_SMTP_FROM")
}

// A message reaches a real SMTP server (mailpit) with its plain-text and HTML parts,
// over STARTTLS (mailpit refuses mail without it), authenticated with the URL's
// credentials; a wrong password is refused without the error showing it.
func TestSendThroughMailpit(t *testing.T) {
	mp := testenv.StartMailpit(t, testenv.MailpitOptions{User: "svc", Password: "pa55-word", STARTTLS: true})
	c, err := Parse(mp.SMTPURL(), "otelcol-svc <noreply@example.com>")
	require.NoError(t, err)
	c.RootCAs = mp.CertPool
	m, err := Verification("ana@example.com", "https://svc.example.com", "https://svc.example.com/verify-email?token=osv_abc", 48*time.Hour)
	require.NoError(t, err)
	require.NoError(t, New(c).Send(context.Background(), m))

	got := mp.WaitFor(t, "ana@example.com", "Confirm your email address", 1)
	assert.Equal(t, "svc", got.Username, "sent with SMTP AUTH")
	assert.Equal(t, "noreply@example.com", got.From.Address)
	assert.Contains(t, got.Text, "https://svc.example.com/verify-email?token=osv_abc")
	assert.Contains(t, got.Text, "2 days")
	assert.Contains(t, got.HTML, `href="https://svc.example.com/verify-email?token=osv_abc"`)

	bad := c
	bad.Password = "wrong-pa55"
	err = New(bad).Send(context.Background(), m)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "wrong-pa55")
	assert.Len(t, mp.Messages(t, "ana@example.com"), 1, "the refused message was not delivered")
}

// A server that does not offer STARTTLS (or whose offer someone on the path stripped)
// gets nothing: a reset link is not sent in clear.
func TestSendRefusesWithoutSTARTTLS(t *testing.T) {
	mp := testenv.StartMailpit(t, testenv.MailpitOptions{})
	c, err := Parse(mp.SMTPURL(), "noreply@example.com")
	require.NoError(t, err)
	// The test server is on loopback, which Parse exempts; a remote host is required.
	c.StartTLS = StartTLSRequired
	m, err := PasswordReset("cy@example.com", "https://svc.example.com", "https://svc.example.com/reset-password?token=osr_x", 30*time.Minute)
	require.NoError(t, err)
	err = New(c).Send(context.Background(), m)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "STARTTLS")

	// The same server takes it when STARTTLS is opportunistic (a loopback host's
	// default, or ?starttls=opportunistic): the refusal above is the control plane's.
	c.StartTLS = StartTLSOpportunistic
	require.NoError(t, New(c).Send(context.Background(), m))
	mp.WaitFor(t, "cy@example.com", "Reset your password", 1)
	assert.Len(t, mp.Messages(t, "cy@example.com"), 1, "the refused message never arrived")
}

// smtps:// speaks TLS from the first byte; a server whose certificate the control plane
// does not trust gets nothing.
func TestSendImplicitTLS(t *testing.T) {
	mp := testenv.StartMailpit(t, testenv.MailpitOptions{ImplicitTLS: true})
	c, err := Parse(mp.SMTPURL(), "noreply@example.com")
	require.NoError(t, err)
	require.True(t, c.ImplicitTLS)
	m, err := PasswordReset("bo@example.com", "https://svc.example.com", "https://svc.example.com/reset-password?token=osr_x", 30*time.Minute)
	require.NoError(t, err)

	require.Error(t, New(c).Send(context.Background(), m), "an untrusted certificate is refused")
	c.RootCAs = mp.CertPool
	require.NoError(t, New(c).Send(context.Background(), m))
	got := mp.WaitFor(t, "bo@example.com", "Reset your password", 1)
	assert.Contains(t, got.Text, "30 minutes")
	assert.Len(t, mp.Messages(t, "bo@example.com"), 1)
}

// What users write (a project's name) cannot add headers or markup to a message.
func TestInvitationEscapesUserText(t *testing.T) {
	m, err := Invitation("b@example.com", "https://svc.example.com", "https://svc.example.com/invitation?token=x",
		"<b>prod</b>\r\nBcc: evil@example.com", "admin", "a@example.com", 7*24*time.Hour)
	require.NoError(t, err)
	assert.NotContains(t, m.Subject, "\n")
	assert.NotContains(t, m.HTML, "<b>prod</b>")
	assert.Contains(t, m.HTML, "&lt;b&gt;prod&lt;/b&gt;")
	assert.True(t, strings.HasPrefix(m.Subject, "a@example.com invited you to"))
	assert.Contains(t, m.Text, "7 days")
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"smtp://u:p@h:25", "smtps://h", "smtp://[::1]:587", "smtp://u@h:99999", "smtp://%41:%42@h"} {
		f.Add(s, "noreply@example.com")
	}
	f.Fuzz(func(t *testing.T, raw, from string) {
		c, err := Parse(raw, from)
		if err != nil {
			if pw := passwordOf(raw); len(pw) > 3 && strings.Contains(err.Error(), pw) {
				t.Fatalf("error shows the password: %v", err)
			}
			return
		}
		if raw != "" && (c.Host == "" || c.Port < 1 || c.Port > 65535 || c.From == "") {
			t.Fatalf("accepted %q as %+v", raw, c)
		}
	})
}

func passwordOf(raw string) string {
	i := strings.Index(raw, "://")
	if i < 0 {
		return ""
	}
	rest := raw[i+3:]
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return ""
	}
	_, pw, ok := strings.Cut(rest[:at], ":")
	if !ok {
		return ""
	}
	return pw
}
