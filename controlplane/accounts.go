package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/controlplane/service"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/usage"
)

// Exit codes of the accounts commands.
const (
	exitOK      = 0
	exitFailed  = 1 // the command could not be done: unknown account, database or NATS
	exitUsage   = 2 // the command line is wrong
	accountsCmd = "controlplane accounts"
)

const accountsUsage = `usage:
  controlplane                                  serve the API (settings from the environment)
  controlplane accounts set-limit <email> <n> [--projects <p>]
  controlplane accounts set-limit <email> --projects <p>
                                                give an account its own monthly event limit <n>
                                                (0 = unlimited, "default" = SVC_FREE_TIER_EVENTS again)
                                                and/or its own number of projects <p> it may own
                                                (0 = no limit, "default" = SVC_MAX_PROJECTS_PER_ACCOUNT)
  controlplane accounts list                    every account: limits, projects and this month's events
The accounts commands use the server's settings (DATABASE_URL or SVC_DATA_DIR, NATS_URL,
SVC_FREE_TIER_EVENTS, SVC_MAX_PROJECTS_PER_ACCOUNT, SVC_MIRROR_REPLICAS). Exit status: 0 done,
1 failed, 2 wrong usage.
`

// accounts runs `controlplane accounts ...` for operators: limits live in the usage
// limits bucket (internal/usage), which every receiver watches, so a new limit is in
// force on all of them within a second; accounts are named by email, as operators know
// them, and resolved to ids through the database.
func accounts(args []string, stdout, stderr io.Writer) int {
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, accountsCmd+": "+format+"\n\n%s", append(a, accountsUsage)...)
		return exitUsage
	}
	if len(args) == 0 {
		return usageErr("name a command: set-limit or list")
	}
	var email string
	var limit int64
	// setEvents and setProjects say what set-limit changes; a nil projects is "default".
	setEvents, useDefault := false, false
	setProjects := false
	var projects *int64
	switch args[0] {
	case "set-limit":
		rest := args[1:]
		for i := 0; i < len(rest); i++ {
			if rest[i] != "--projects" && !strings.HasPrefix(rest[i], "--projects=") {
				continue
			}
			v, ok := strings.CutPrefix(rest[i], "--projects=")
			n := 1
			if !ok {
				if i+1 >= len(rest) {
					return usageErr("--projects takes a number: --projects 25")
				}
				v, n = rest[i+1], 2
			}
			if setProjects {
				return usageErr("--projects is given twice")
			}
			setProjects = true
			if v != "default" {
				p, err := strconv.ParseInt(strings.ReplaceAll(v, "_", ""), 10, 64)
				if err != nil || p < 0 {
					return usageErr("the project limit must be a whole number, 0 (no limit) or \"default\"; got %q", v)
				}
				projects = &p
			}
			rest = append(rest[:i:i], rest[i+n:]...)
			i--
		}
		if len(rest) < 1 || len(rest) > 2 || (len(rest) == 1 && !setProjects) {
			return usageErr("set-limit takes an email and a number, and or --projects: set-limit ops@example.com 50000 --projects 25")
		}
		var ok bool
		if email, ok = service.NormalizeEmail(rest[0]); !ok {
			return usageErr("%q is not an email address", rest[0])
		}
		if len(rest) == 1 {
			break
		}
		setEvents = true
		if rest[1] == "default" {
			useDefault = true
			break
		}
		n, err := strconv.ParseInt(strings.ReplaceAll(rest[1], "_", ""), 10, 64)
		if err != nil || n < 0 {
			return usageErr("the limit must be a whole number of events per month, 0 (unlimited) or \"default\"; got %q", rest[1])
		}
		limit = n
	case "list":
		if len(args) != 1 {
			return usageErr("list takes no arguments")
		}
	case "-h", "--help", "help":
		fmt.Fprint(stdout, accountsUsage)
		return exitOK
	default:
		return usageErr("unknown command %q", args[0])
	}
	def, err := freeTierEvents()
	if err != nil {
		return usageErr("%v", err)
	}
	defProjects, err := maxProjectsPerAccount()
	if err != nil {
		return usageErr("%v", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	db, err := store.Open(ctx, env("SVC_DATA_DIR", "./data"), os.Getenv("DATABASE_URL"))
	if err != nil {
		fmt.Fprintf(stderr, "%s: the database: %v\n", accountsCmd, err)
		return exitFailed
	}
	defer db.Close()
	if args[0] == "set-limit" && !setEvents {
		// The project limit lives in the database alone: no NATS needed.
		return setProjectLimit(ctx, db, email, projects, defProjects, stdout, stderr)
	}
	natsURL := env("NATS_URL", defaultNATSURL)
	// No reconnect loop: an operator at a terminal wants the failure, not a wait.
	nc, err := nats.Connect(natsURL, nats.Name("otelcol-svc controlplane accounts"), nats.Timeout(5*time.Second))
	if err != nil {
		fmt.Fprintf(stderr, "%s: NATS at %s is unreachable: %v\n", accountsCmd, natsURL, err)
		return exitFailed
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", accountsCmd, err)
		return exitFailed
	}
	replicas, _ := strconv.Atoi(env("SVC_MIRROR_REPLICAS", "1"))
	rd, err := usage.OpenReader(ctx, js, def, replicas)
	if err != nil {
		fmt.Fprintf(stderr, "%s: the usage buckets in NATS: %v\n", accountsCmd, err)
		return exitFailed
	}

	if args[0] == "list" {
		if err := listAccounts(ctx, db, rd, def, defProjects, stdout); err != nil {
			fmt.Fprintf(stderr, "%s list: %v\n", accountsCmd, err)
			return exitFailed
		}
		return exitOK
	}

	var u store.User
	err = db.InTx(ctx, func(tx *store.Tx) error {
		u, err = tx.UserByEmail(ctx, email)
		return err
	})
	if err != nil {
		return setLimitLookupFailed(stderr, email, err)
	}
	was, had, err := rd.Limits().Get(ctx, u.ID)
	if err != nil {
		fmt.Fprintf(stderr, "%s set-limit: %v\n", accountsCmd, err)
		return exitFailed
	}
	before := limitText(was, had, def, "unlimited")
	if useDefault {
		err = rd.Limits().Delete(ctx, u.ID)
	} else {
		err = rd.Limits().Set(ctx, u.ID, limit)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s set-limit: %v\n", accountsCmd, err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "%s: limit %s (was %s); every receiver applies it within a second\n",
		email, limitText(limit, !useDefault, def, "unlimited"), before)
	if setProjects {
		return setProjectLimit(ctx, db, email, projects, defProjects, stdout, stderr)
	}
	return exitOK
}

// setProjectLimit gives the account of email its own project limit (nil: the default
// again). Projects it owns beyond a lowered limit stay; it creates no more until under it.
func setProjectLimit(ctx context.Context, db *store.Store, email string, limit *int64, def int64, stdout, stderr io.Writer) int {
	var was, now int64
	var wasOwn bool
	var owned int64
	err := db.InTx(ctx, func(tx *store.Tx) error {
		u, err := tx.UserByEmail(ctx, email)
		if err != nil {
			return err
		}
		if was, wasOwn, err = tx.ProjectLimit(ctx, u.ID, def); err != nil {
			return err
		}
		if err := tx.SetProjectLimit(ctx, u.ID, limit); err != nil {
			return err
		}
		if now, _, err = tx.ProjectLimit(ctx, u.ID, def); err != nil {
			return err
		}
		owned, err = tx.OwnedProjects(ctx, u.ID)
		return err
	})
	if err != nil {
		return setLimitLookupFailed(stderr, email, err)
	}
	fmt.Fprintf(stdout, "%s: project limit %s (was %s); it owns %d\n", email,
		limitText(now, limit != nil, def, "none"), limitText(was, wasOwn, def, "none"), owned)
	return exitOK
}

// limitText shows an account's limit: its own, or the default's with the word default;
// zero (0 or less, no limit) is shown as the word zero: "unlimited" events, "none" for
// projects.
func limitText(n int64, own bool, def int64, zero string) string {
	show := func(n int64) string {
		if n <= 0 {
			return zero
		}
		return strconv.FormatInt(n, 10)
	}
	if !own {
		return "default (" + show(def) + ")"
	}
	return show(n)
}

// listAccounts prints every account by email with its limits, projects and this month's
// events.
func listAccounts(ctx context.Context, db *store.Store, rd *usage.Reader, def, defProjects int64, w io.Writer) error {
	type row struct {
		u            store.User
		limit, owned int64
		ownLimit     bool
	}
	var rows []row
	err := db.InTx(ctx, func(tx *store.Tx) error {
		users, err := tx.AllUsers(ctx)
		if err != nil {
			return err
		}
		for _, u := range users {
			r := row{u: u}
			if r.limit, r.ownLimit, err = tx.ProjectLimit(ctx, u.ID, defProjects); err != nil {
				return err
			}
			if r.owned, err = tx.OwnedProjects(ctx, u.ID); err != nil {
				return err
			}
			rows = append(rows, r)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("the database: %w", err)
	}
	own, err := rd.Limits().List(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "EMAIL\tLIMIT\tEVENTS %s\tPROJECTS\tPROJECT LIMIT\n", usage.Month(now))
	for _, r := range rows {
		n, ok := own[r.u.ID]
		a, err := rd.Account(ctx, r.u.ID, now)
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", r.u.Email, limitText(n, ok, def, "unlimited"), a.Events, r.owned, limitText(r.limit, r.ownLimit, defProjects, "none"))
	}
	return tw.Flush()
}

// setLimitLookupFailed says why set-limit could not read the account, in the words both
// of its forms (events and projects) use.
func setLimitLookupFailed(stderr io.Writer, email string, err error) int {
	if errors.Is(err, store.ErrNotFound) {
		fmt.Fprintf(stderr, "%s set-limit: no account with the email %s (`%s list` shows them)\n", accountsCmd, email, accountsCmd)
	} else {
		fmt.Fprintf(stderr, "%s set-limit: the database: %v\n", accountsCmd, err)
	}
	return exitFailed
}
