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

	"github.com/otelcol-svc/otelcol-svc/components/usage"
	"github.com/otelcol-svc/otelcol-svc/controlplane/service"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
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
  controlplane accounts set-limit <email> <n>   give an account its own monthly event limit
                                                (0 = unlimited, "default" = SVC_FREE_TIER_EVENTS again)
  controlplane accounts list                    every account: limit and this month's events
The accounts commands use the server's settings (DATABASE_URL or SVC_DATA_DIR, NATS_URL,
SVC_FREE_TIER_EVENTS, SVC_MIRROR_REPLICAS). Exit status: 0 done, 1 failed, 2 wrong usage.
`

// accounts runs `controlplane accounts ...` for operators: limits live in the usage
// limits bucket (components/usage), which every receiver watches, so a new limit is in
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
	useDefault := false
	switch args[0] {
	case "set-limit":
		if len(args) != 3 {
			return usageErr("set-limit takes an email and a number: set-limit ops@example.com 50000")
		}
		var ok bool
		if email, ok = service.NormalizeEmail(args[1]); !ok {
			return usageErr("%q is not an email address", args[1])
		}
		if args[2] == "default" {
			useDefault = true
			break
		}
		n, err := strconv.ParseInt(strings.ReplaceAll(args[2], "_", ""), 10, 64)
		if err != nil || n < 0 {
			return usageErr("the limit must be a whole number of events per month, 0 (unlimited) or \"default\"; got %q", args[2])
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
		if err := listAccounts(ctx, db, rd, def, stdout); err != nil {
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
	if errors.Is(err, store.ErrNotFound) {
		fmt.Fprintf(stderr, "%s set-limit: no account with the email %s (`%s list` shows them)\n", accountsCmd, email, accountsCmd)
		return exitFailed
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s set-limit: the database: %v\n", accountsCmd, err)
		return exitFailed
	}
	was, had, err := rd.Limits().Get(ctx, u.ID)
	if err != nil {
		fmt.Fprintf(stderr, "%s set-limit: %v\n", accountsCmd, err)
		return exitFailed
	}
	before := limitText(was, had, def)
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
		email, limitText(limit, !useDefault, def), before)
	return exitOK
}

// limitText shows an account's limit: its own, or the default's with the word default.
func limitText(n int64, own bool, def int64) string {
	show := func(n int64) string {
		if n <= 0 {
			return "unlimited"
		}
		return strconv.FormatInt(n, 10)
	}
	if !own {
		return "default (" + show(def) + ")"
	}
	return show(n)
}

// listAccounts prints every account by email with its limit and this month's events.
func listAccounts(ctx context.Context, db *store.Store, rd *usage.Reader, def int64, w io.Writer) error {
	var users []store.User
	err := db.InTx(ctx, func(tx *store.Tx) error {
		var err error
		users, err = tx.AllUsers(ctx)
		return err
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
	fmt.Fprintf(tw, "EMAIL\tLIMIT\tEVENTS %s\n", usage.Month(now))
	for _, u := range users {
		n, ok := own[u.ID]
		a, err := rd.Account(ctx, u.ID, now)
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\n", u.Email, limitText(n, ok, def), a.Events)
	}
	return tw.Flush()
}
