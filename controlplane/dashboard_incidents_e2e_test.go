package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/internal/incident"
	"github.com/otelcol-svc/otelcol-svc/test/testenv"
)

// incidentSeeder gives a project the incidents an ops engineer would find after a bad
// deploy, through internal/incident's Store on the receiver's NATS, as the pipeline role
// writes them: a resolved one from earlier, one acknowledged by the on-call engineer,
// and one open with a delivered agent call, its result, and events that joined since.
// POST /seed?project=<id> writes them and answers the open incident's call request id.
type incidentSeeder struct {
	t  *testing.T
	js jetstream.JetStream
}

// Request id of the open incident's opening call, for the timeline's delivery link.
const seededRequestID = "req_e2e_checkout_opened"

func (s *incidentSeeder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	project := r.URL.Query().Get("project")
	if r.Method != http.MethodPost || project == "" {
		http.Error(w, "POST /seed?project=<id>", http.StatusBadRequest)
		return
	}
	if err := s.seed(r.Context(), project); err != nil {
		s.t.Logf("seeding incidents: %v", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_, _ = w.Write([]byte(seededRequestID))
}

func (s *incidentSeeder) seed(ctx context.Context, project string) error {
	st, err := incident.Open(ctx, s.js, 1)
	if err != nil {
		return err
	}
	set := incident.Settings{GroupWait: 30 * time.Second, GroupInterval: 5 * time.Minute, ResolveAfter: 30 * time.Minute}
	now := time.Now()
	at := func(d time.Duration) time.Time { return now.Add(-d) }
	apply := func(j incident.Join) error {
		_, err := st.Apply(ctx, project, set, j)
		return err
	}

	// Earlier today: billing timeouts, resolved by a resolve_when event.
	if err := apply(incident.Join{Fingerprint: "billing-api", BatchKey: "b1", Events: 4,
		Title: "billing-api: payment provider timeouts", At: at(90 * time.Minute)}); err != nil {
		return err
	}
	if err := apply(incident.Join{Fingerprint: "billing-api", BatchKey: "b2", Resolve: true, At: at(70 * time.Minute)}); err != nil {
		return err
	}

	// Search latency, acknowledged by the on-call engineer.
	if err := apply(incident.Join{Fingerprint: "search", BatchKey: "s1", Events: 9,
		Title: "search: p99 latency above 2 s", At: at(25 * time.Minute)}); err != nil {
		return err
	}
	inc, err := st.List(ctx, project, incident.StatusOpen, 10)
	if err != nil {
		return err
	}
	for _, i := range inc {
		if i.Fingerprint == "search" {
			if _, _, err := st.Act(ctx, project, i.ID, incident.ActionAcknowledge, "user:oncall@example.com", at(20*time.Minute)); err != nil {
				return err
			}
		}
	}

	// Checkout 5xx, open: opened, the agent called and answered, more events since.
	if err := apply(incident.Join{Fingerprint: "checkout", BatchKey: "c1", Events: 12,
		Title: "checkout: HTTP 5xx rate above 5%", At: at(8 * time.Minute)}); err != nil {
		return err
	}
	fph := incident.FingerprintHash("checkout")
	if _, ok, err := st.Claim(ctx, project, fph, incident.ReasonOpened, seededRequestID, "e2e", at(7*time.Minute), set, time.Minute); err != nil || !ok {
		return errorOr(err, "the opening call was not due")
	}
	if _, _, err := st.Complete(ctx, project, fph, seededRequestID, "delivered", at(7*time.Minute-3*time.Second)); err != nil {
		return err
	}
	if _, ok, err := st.AttachResult(ctx, project, seededRequestID,
		"Root cause: the 14:02 deploy of checkout v2.31 points PAYMENTS_URL at the staging gateway; every card payment fails with 502. "+
			"Roll back to v2.30 or fix the variable.", at(6*time.Minute)); err != nil || !ok {
		return errorOr(err, "the result found no incident")
	}
	return apply(incident.Join{Fingerprint: "checkout", BatchKey: "c2", Events: 5, At: at(1 * time.Minute)})
}

func errorOr(err error, msg string) error {
	if err != nil {
		return err
	}
	return errors.New(msg)
}

// TestDashboardIncidentsInTheBrowser drives controlplane/web/e2e/incidents.mjs: an owner
// sees why the Incidents page is empty (legacy mode) and sets incident mode with its
// fields on the Pipeline page; with incidents in the receiver's store, the open one is
// listed first, its page tells its story (the agent's call with a link to its delivery,
// the result's text), and Acknowledge shows "Acknowledged by user:<email>" without a
// reload; a member sees the four actions disabled and why; a Slack app destination is
// created with write-only tokens and shows its interactions URL and Slack's setup steps.
// Screenshots go to controlplane/web/test-output/incidents.
func TestDashboardIncidentsInTheBrowser(t *testing.T) {
	node, chromium, webDir := browserTestNeeds(t)
	n := testenv.StartNATS(t)
	startValidator(t, n.URL())
	_, js := testenv.Connect(t, n.URL())
	seeder := httptest.NewServer(&incidentSeeder{t: t, js: js})
	t.Cleanup(seeder.Close)
	cpListen := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	// The receiver role alone: the console answers from the incidents store, and no
	// pipeline role's ticker calls an agent for the seeded incidents meanwhile.
	col := testenv.StartCollector(t, testenv.CollectorOptions{Config: "configs/receiver.yaml",
		Env: map[string]string{"NATS_URL": n.URL(), "SVC_STREAM_REPLICAS": "1", "SVC_DASHBOARD_ORIGIN": "http://" + cpListen}})
	cp := testenv.StartControlPlane(t, map[string]string{"NATS_URL": n.URL(), "SVC_JWT_SECRET": testJWTSecret,
		"SVC_DATA_DIR": t.TempDir(), "SVC_PUBLIC_RECEIVER_URL": col.HTTP, "SVC_CONTROLPLANE_LISTEN": cpListen})

	runBrowserScript(t, node, chromium, webDir, "incidents", 3*time.Minute,
		"DASHBOARD_URL="+cp.URL, "RECEIVER_URL="+col.HTTP, "SEED_URL="+seeder.URL+"/seed")
}
