package mailer

import (
	"bytes"
	htmltemplate "html/template"
	"strconv"
	"strings"
	texttemplate "text/template"
	"time"
)

// The messages the control plane sends. Each is rendered twice, as plain text and as
// HTML (html/template escapes what comes from users: project names, addresses), with
// the instance's public URL so the reader knows which deployment wrote.

// Verification asks an account to confirm its address.
func Verification(to, instance, link string, valid time.Duration) (Message, error) {
	return render(to, "Confirm your email address", verificationText, verificationHTML,
		map[string]any{"Instance": instance, "Link": link, "Valid": human(valid)})
}

// Invitation invites an address into a project.
func Invitation(to, instance, link, project, role, inviter string, valid time.Duration) (Message, error) {
	return render(to, inviter+" invited you to "+oneLine(project), invitationText, invitationHTML,
		map[string]any{"Instance": instance, "Link": link, "Project": project, "Role": role, "Inviter": inviter, "Valid": human(valid)})
}

// PasswordReset carries a one-time link that sets a new password.
func PasswordReset(to, instance, link string, valid time.Duration) (Message, error) {
	return render(to, "Reset your password", resetText, resetHTML,
		map[string]any{"Instance": instance, "Link": link, "Valid": human(valid)})
}

// PasswordChanged tells the owner of an account its password changed, so a change they
// did not make does not go unnoticed.
func PasswordChanged(to, instance string) (Message, error) {
	return render(to, "Your password was changed", changedText, changedHTML, map[string]any{"Instance": instance})
}

const verificationText = `Confirm that {{.Instance}} may send mail to this address:

{{.Link}}

The link works once, for {{.Valid}}. Until the address is confirmed, invitations to it
cannot find your account.

If you did not sign up at {{.Instance}}, ignore this message.
`

const verificationHTML = `<p>Confirm that <a href="{{.Instance}}">{{.Instance}}</a> may send mail to this address:</p>
<p><a href="{{.Link}}">Confirm my email address</a></p>
<p>The link works once, for {{.Valid}}. Until the address is confirmed, invitations to it cannot find your account.</p>
<p>If you did not sign up at {{.Instance}}, ignore this message.</p>
`

const invitationText = `{{.Inviter}} invited you to the project "{{.Project}}" on {{.Instance}} as {{.Role}}.

Accept the invitation (sign up, or log in if you have an account):

{{.Link}}

The link works once, for {{.Valid}}.
`

const invitationHTML = `<p>{{.Inviter}} invited you to the project <strong>{{.Project}}</strong> on <a href="{{.Instance}}">{{.Instance}}</a> as {{.Role}}.</p>
<p><a href="{{.Link}}">Accept the invitation</a> (sign up, or log in if you have an account).</p>
<p>The link works once, for {{.Valid}}.</p>
`

const resetText = `Someone asked to reset the password of your account at {{.Instance}}.

Set a new password:

{{.Link}}

The link works once, for {{.Valid}}. Setting a new password logs you out everywhere.
If you did not ask, ignore this message: your password stays as it is.
`

const resetHTML = `<p>Someone asked to reset the password of your account at <a href="{{.Instance}}">{{.Instance}}</a>.</p>
<p><a href="{{.Link}}">Set a new password</a></p>
<p>The link works once, for {{.Valid}}. Setting a new password logs you out everywhere.
If you did not ask, ignore this message: your password stays as it is.</p>
`

const changedText = `The password of your account at {{.Instance}} was changed, and your other sessions
were logged out.

If you did not change it, reset it at {{.Instance}} at once.
`

const changedHTML = `<p>The password of your account at <a href="{{.Instance}}">{{.Instance}}</a> was changed, and your other sessions were logged out.</p>
<p>If you did not change it, reset it at <a href="{{.Instance}}">{{.Instance}}</a> at once.</p>
`

func render(to, subject, text, html string, data map[string]any) (Message, error) {
	var tb, hb bytes.Buffer
	if err := texttemplate.Must(texttemplate.New("text").Parse(text)).Execute(&tb, data); err != nil {
		return Message{}, err
	}
	if err := htmltemplate.Must(htmltemplate.New("html").Parse(html)).Execute(&hb, data); err != nil {
		return Message{}, err
	}
	return Message{To: to, Subject: oneLine(subject), Text: tb.String(), HTML: hb.String()}, nil
}

// oneLine keeps a user's text from starting new header lines in a subject.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func human(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return formatInt(int(d/(24*time.Hour))) + " days"
	case d >= 2*time.Hour:
		return formatInt(int(d/time.Hour)) + " hours"
	default:
		return formatInt(int(d/time.Minute)) + " minutes"
	}
}

func formatInt(n int) string {
	return strconv.Itoa(n)
}
