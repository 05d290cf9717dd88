package mailer

import (
	"time"
)

// UsageNotice tells an account's owner it has used a share of its month's events.
func UsageNotice(to, instance, link string, percent int, limit, used int64, resetAt time.Time) (Message, error) {
	subject := "You have used " + formatInt(percent) + "% of this month's events"
	return render(to, subject, usageText, usageHTML, map[string]any{"Instance": instance, "Link": link,
		"Percent": percent, "Limit": group(limit), "Used": group(used), "Reset": resetAt.UTC().Format("2006-01-02")})
}

// FailureNotice tells a project's owners and admins that at least count deliveries
// failed since since; the failures themselves (and any event data) are only on the
// dashboard's page.
func FailureNotice(to, instance, link, project string, count int, since time.Time) (Message, error) {
	what := "deliveries"
	if count == 1 {
		what = "delivery"
	}
	return render(to, "Deliveries failed in "+oneLine(project), failureText, failureHTML,
		map[string]any{"Instance": instance, "Link": link, "Project": project, "Count": count, "What": what,
			"Since": since.UTC().Format("2006-01-02 15:04 UTC")})
}

const usageText = `Your account at {{.Instance}} has used {{.Percent}}% of this month's {{.Limit}} events ({{.Used}} so far).
{{if ge .Percent 100}}Further events are refused until the count resets on {{.Reset}}.{{else}}The count resets on {{.Reset}}.{{end}}

See your usage:

{{.Link}}
`

const usageHTML = `<p>Your account at <a href="{{.Instance}}">{{.Instance}}</a> has used {{.Percent}}% of this month's {{.Limit}} events ({{.Used}} so far).</p>
<p>{{if ge .Percent 100}}Further events are refused until the count resets on {{.Reset}}.{{else}}The count resets on {{.Reset}}.{{end}}</p>
<p><a href="{{.Link}}">See your usage</a></p>
`

const failureText = `In the project "{{.Project}}" on {{.Instance}},
at least {{.Count}} {{.What}} failed since {{.Since}} (dead-lettered, or paused behind
a destination's open circuit). The project's destinations were told too.

See the deliveries, and replay them:

{{.Link}}
`

const failureHTML = `<p>In the project <strong>{{.Project}}</strong> on <a href="{{.Instance}}">{{.Instance}}</a>, at least {{.Count}} {{.What}} failed since {{.Since}} (dead-lettered, or paused behind a destination's open circuit). The project's destinations were told too.</p>
<p><a href="{{.Link}}">See the deliveries, and replay them</a></p>
`

// group writes n with thousands separators, as the notices to destinations do.
func group(n int64) string {
	s := formatInt(int(n))
	neg := len(s) > 0 && s[0] == '-'
	if neg {
		s = s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}
