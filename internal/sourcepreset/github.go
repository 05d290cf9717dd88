package sourcepreset

import (
	"fmt"
	"net/http"
	"strings"
)

// githubHeaders are the delivery headers GitHub documents
// (https://docs.github.com/en/webhooks/webhook-events-and-payloads#delivery-headers),
// less X-Hub-Signature and X-Hub-Signature-256.
var githubHeaders = []string{
	"X-GitHub-Event", "X-GitHub-Delivery", "X-GitHub-Hook-ID",
	"X-GitHub-Hook-Installation-Target-ID", "X-GitHub-Hook-Installation-Target-Type",
	"User-Agent",
}

// splitGitHub reads one GitHub webhook delivery: the event name is in the
// X-GitHub-Event header, not the body.
func splitGitHub(h http.Header, body []byte, _ limits) ([]Event, error) {
	name := strings.TrimSpace(h.Get("X-GitHub-Event"))
	if name == "" {
		return nil, fail(GitHub, "the request has no X-GitHub-Event header; this URL takes GitHub webhook deliveries (content type application/json)")
	}
	doc, err := decodeObject(GitHub, body)
	if err != nil {
		return nil, err
	}
	ev := Event{Payload: body, EventType: name, Labels: map[string]string{}, Headers: keepHeaders(h, githubHeaders...)}
	action := str(doc["action"])
	if action != "" {
		ev.EventType = name + "." + action
	}
	ev.DedupID = dedupID(strings.TrimSpace(h.Get("X-GitHub-Delivery")))

	repo := str(get(doc, "repository", "full_name"))
	sender := str(get(doc, "sender", "login"))
	setLabel(ev.Labels, "repository", repo)
	setLabel(ev.Labels, "sender", sender)
	if org := str(get(doc, "organization", "login")); org != "" {
		ev.Labels["organization"] = org
	}
	prefix := ""
	if repo != "" {
		prefix = repo + ": "
	}
	by := ""
	if sender != "" {
		by = " by " + sender
	}

	switch name {
	case "push":
		ref := str(doc["ref"])
		branch := strings.TrimPrefix(strings.TrimPrefix(ref, "refs/heads/"), "refs/tags/")
		setLabel(ev.Labels, "ref", ref)
		pusher := str(get(doc, "pusher", "name"))
		if pusher == "" {
			pusher = sender
		}
		n := 0
		if commits, ok := doc["commits"].([]any); ok {
			n = len(commits)
		}
		switch {
		case doc["deleted"] == true:
			ev.Text = fmt.Sprintf("%s%s deleted %s", prefix, pusher, branch)
		default:
			ev.Text = fmt.Sprintf("%s%s pushed %d commit%s to %s", prefix, pusher, n, plural(n), branch)
			if msg := str(get(doc, "head_commit", "message")); msg != "" {
				ev.Text += ": " + msg
			}
		}
		// repository.pushed_at is a unix time in push payloads.
		ev.Time = firstTime(get(doc, "head_commit", "timestamp"), get(doc, "repository", "pushed_at"))
	case "pull_request", "pull_request_review", "pull_request_review_comment":
		pr := get(doc, "pull_request")
		num := str(get(pr, "number"))
		if num == "" {
			num = str(doc["number"])
		}
		what := "PR"
		if name == "pull_request_review" {
			what = "review of PR"
		} else if name == "pull_request_review_comment" {
			what = "review comment on PR"
		}
		ev.Text = fmt.Sprintf("%s%s #%s %s%s: %s", prefix, what, num, verb(action, get(pr, "merged")), by, str(get(pr, "title")))
		setLabel(ev.Labels, "base", str(get(pr, "base", "ref")))
		ev.Time = firstTime(get(doc, "review", "submitted_at"), get(doc, "comment", "updated_at"), get(pr, "updated_at"), get(pr, "created_at"))
	case "issues", "issue_comment":
		issue := get(doc, "issue")
		what := "issue"
		if name == "issue_comment" {
			what = "comment on issue"
		}
		ev.Text = fmt.Sprintf("%s%s #%s %s%s: %s", prefix, what, str(get(issue, "number")), action, by, str(get(issue, "title")))
		ev.Time = firstTime(get(doc, "comment", "updated_at"), get(issue, "updated_at"), get(issue, "created_at"))
	case "workflow_run":
		run := get(doc, "workflow_run")
		ev.Text = fmt.Sprintf("%sworkflow %s %s", prefix, str(get(run, "name")), action)
		if c := str(get(run, "conclusion")); c != "" {
			ev.Text += " (" + c + ")"
		}
		if b := str(get(run, "head_branch")); b != "" {
			ev.Text += " on " + b
		}
		setLabel(ev.Labels, "workflow", str(get(run, "name")))
		setLabel(ev.Labels, "conclusion", str(get(run, "conclusion")))
		setLabel(ev.Labels, "branch", str(get(run, "head_branch")))
		ev.Time = firstTime(get(run, "updated_at"), get(run, "run_started_at"), get(run, "created_at"))
	case "check_run":
		run := get(doc, "check_run")
		ev.Text = fmt.Sprintf("%scheck %s %s", prefix, str(get(run, "name")), action)
		if c := str(get(run, "conclusion")); c != "" {
			ev.Text += " (" + c + ")"
		}
		setLabel(ev.Labels, "check", str(get(run, "name")))
		setLabel(ev.Labels, "conclusion", str(get(run, "conclusion")))
		ev.Time = firstTime(get(run, "completed_at"), get(run, "started_at"))
	default:
		ev.Text = prefix + strings.ReplaceAll(ev.EventType, ".", " ") + by
		// Most events carry their object under the event's own name (release, deployment,
		// workflow_job, ...), each with updated_at or created_at.
		obj := get(doc, name)
		ev.Time = firstTime(get(obj, "updated_at"), get(obj, "completed_at"), get(obj, "created_at"))
	}
	ev.Text = oneLine(ev.Text)
	return []Event{ev}, nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// verb says "merged" for a pull request closed by merging, as GitHub shows it.
func verb(action string, merged any) string {
	if action == "closed" && merged == true {
		return "merged"
	}
	return action
}
