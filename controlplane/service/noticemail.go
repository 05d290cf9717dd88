package service

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/delivery"
	"github.com/otelcol-svc/otelcol-svc/internal/mailer"
	"github.com/otelcol-svc/otelcol-svc/internal/usage"
)

// Notices by email. The data plane tells a project's destinations of usage thresholds
// (usage.BucketUsage's "n." entries, one per account, month, limit and share) and of
// failed deliveries (delivery.FailureBucket, one entry per project whose "sent" moves
// once per interval). The control plane watches the same entries and mails the people:
// a threshold to the account's owner, failures to the project's owners and admins. Only
// the entries' bookkeeping is read (counts, times, ids): they carry no event data.
//
// Every replica watches; a row in notice_mails per notice and recipient, inserted before
// the mail goes, decides which one sends it. A mail that fails gives its row back, so a
// later update of the entry (a usage notice's claim becoming "sent") or a restart tries
// again; a failure notice is not retried past failureMailMaxAge.

// noticeRebind is how long a watch waits before binding its bucket again: the receivers
// or pipelines create the buckets, possibly after the control plane started.
var noticeRebind = 30 * time.Second

// failureMailMaxAge: a failure notice decided longer ago than this when first seen (a
// control plane starting, or email just turned on) is not mailed; the dashboard shows it.
const failureMailMaxAge = time.Hour

// noticeMailKeep is how long a claim is kept: longer than any entry it dedupes is
// mailed for (usage notices of this month or the last, failures of the last hour).
const noticeMailKeep = 70 * 24 * time.Hour

// noticeApplied, when set (by tests), is called after each entry was handled.
var noticeApplied func(e *Email, kve jetstream.KeyValueEntry)

// noticeMailTimeout bounds a notice's lookups, and each of its mails.
const noticeMailTimeout = 30 * time.Second

// WatchNotices mails the data plane's notices until ctx ends; js gives the JetStream
// context once NATS is reachable. Nothing happens when email is off. The returned func
// waits for the watches to end after ctx did.
func (e *Email) WatchNotices(ctx context.Context, js func(context.Context) (jetstream.JetStream, error)) (wait func()) {
	var wg sync.WaitGroup
	if !e.Enabled() {
		return wg.Wait
	}
	fw := &failureWatch{e: e, prev: map[string]failureEntry{}}
	for _, w := range []struct {
		bucket, filter string
		apply          func(context.Context, jetstream.KeyValueEntry)
	}{
		{usage.BucketUsage, "n.>", e.usageNoticeMail},
		{delivery.FailureBucket, ">", fw.apply},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.watchBucket(ctx, js, w.bucket, w.filter, w.apply)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			sctx, cancel := context.WithTimeout(ctx, noticeMailTimeout)
			err := e.Svc.Store.InTx(sctx, func(tx *store.Tx) error {
				return tx.SweepNoticeMails(sctx, time.Now().Add(-noticeMailKeep))
			})
			cancel()
			if err != nil && ctx.Err() == nil {
				e.Logger.Warn("notice mails: sweep", "error", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(24 * time.Hour):
			}
		}
	}()
	return wg.Wait
}

// watchBucket applies every entry of bucket under filter, binding it again after an
// error (NATS away, bucket not created yet) until ctx ends.
func (e *Email) watchBucket(ctx context.Context, js func(context.Context) (jetstream.JetStream, error), bucket, filter string,
	apply func(context.Context, jetstream.KeyValueEntry)) {
	for {
		err := func() error {
			j, err := js(ctx)
			if err != nil {
				return err
			}
			kv, err := j.KeyValue(ctx, bucket)
			if err != nil {
				return err
			}
			w, err := kv.Watch(ctx, filter)
			if err != nil {
				return err
			}
			defer w.Stop() //nolint:errcheck
			for {
				select {
				case <-ctx.Done():
					return nil
				case kve, ok := <-w.Updates():
					if !ok {
						return errors.New("watch ended")
					}
					if kve != nil {
						apply(ctx, kve)
						if noticeApplied != nil {
							noticeApplied(e, kve)
						}
					}
				}
			}
		}()
		if ctx.Err() != nil {
			return
		}
		if !errors.Is(err, jetstream.ErrBucketNotFound) {
			e.Logger.Warn("notice mails: watching "+bucket+" again later", "error", err, "in", noticeRebind)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(noticeRebind):
		}
	}
}

// usageNoticeMail mails a usage threshold's notice to the account's owner, once.
func (e *Email) usageNoticeMail(ctx context.Context, kve jetstream.KeyValueEntry) {
	var n usage.Notice
	if kve.Operation() != jetstream.KeyValuePut || json.Unmarshal(kve.Value(), &n) != nil || n.Account == "" || n.Percent <= 0 {
		return
	}
	// Older notices no longer matter to anyone (the meters retry only these two months).
	now := time.Now()
	if n.Month != usage.Month(now) && n.Month != usage.Month(usage.MonthStart(now).AddDate(0, -1, 0)) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, noticeMailTimeout)
	defer cancel()
	var u store.User
	err := e.Svc.Store.InTx(ctx, func(tx *store.Tx) (err error) {
		u, err = tx.UserByID(ctx, n.Account)
		return err
	})
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			e.Logger.Warn("usage notice not mailed", "account", n.Account, "error", err)
		}
		return
	}
	if u.EmailVerifiedAt.IsZero() {
		return // an unverified address may not be the owner's
	}
	msg, err := mailer.UsageNotice(u.Email, e.PublicURL, e.PublicURL+"/usage", n.Percent, n.Limit, n.Used, n.ResetAt)
	e.mailOnce(ctx, "usage/"+kve.Key()+"/"+u.ID, msg, err)
}

// failureEntry is what is read of a delivery.FailureBucket entry.
type failureEntry struct {
	Sent    time.Time `json:"sent"`
	Pending int       `json:"pending,omitempty"`
	Since   time.Time `json:"since,omitzero"`
}

// failureWatch remembers each project's last entry: the failures it counted are the
// ones the next notice tells.
type failureWatch struct {
	e    *Email
	prev map[string]failureEntry
}

// apply mails a project's owners and admins when its entry shows a new notice decided:
// "sent" moved and nothing is pending of the new interval yet.
func (fw *failureWatch) apply(ctx context.Context, kve jetstream.KeyValueEntry) {
	project := kve.Key()
	var st failureEntry
	if kve.Operation() != jetstream.KeyValuePut || json.Unmarshal(kve.Value(), &st) != nil || st.Sent.IsZero() {
		delete(fw.prev, project)
		return
	}
	prev, seen := fw.prev[project]
	fw.prev[project] = st
	if st.Pending > 0 || (seen && prev.Sent.Equal(st.Sent)) || time.Since(st.Sent) > failureMailMaxAge {
		return
	}
	// The entry keeps no count of what a notice told: the failures counted during the
	// interval before are told with it, and a notice decided by a new failure adds that
	// one, so this is a lower bound ("at least").
	count, since := 1, st.Sent
	if seen && prev.Pending > 0 {
		count, since = prev.Pending, prev.Since
	}
	var (
		p    store.Project
		tell []store.NoticeRecipient
	)
	e := fw.e
	lctx, cancel := context.WithTimeout(ctx, noticeMailTimeout)
	defer cancel()
	err := e.Svc.Store.InTx(lctx, func(tx *store.Tx) (err error) {
		if p, err = tx.ProjectByID(lctx, project); err != nil {
			return err
		}
		tell, err = tx.FailureNoticeRecipients(lctx, project)
		return err
	})
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			e.Logger.Warn("failure notice not mailed", "project", project, "error", err)
		}
		return
	}
	link := e.PublicURL + "/projects/" + url.PathEscape(project) + "/deliveries"
	for _, r := range tell {
		msg, err := mailer.FailureNotice(r.Email, e.PublicURL, link, p.Name, count, since)
		e.mailOnce(ctx, "failed/"+project+"/"+strconv.FormatInt(st.Sent.UnixNano(), 10)+"/"+r.UserID, msg, err)
	}
}

// mailOnce sends msg unless a control plane already claimed notice; a failed send gives
// the claim back.
func (e *Email) mailOnce(ctx context.Context, notice string, msg mailer.Message, err error) {
	if err != nil {
		e.Logger.Warn("notice mail not rendered", "notice", notice, "error", err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, noticeMailTimeout)
	defer cancel()
	var won bool
	if err := e.Svc.Store.InTx(ctx, func(tx *store.Tx) (err error) {
		won, err = tx.ClaimNoticeMail(ctx, notice, time.Now())
		return err
	}); err != nil || !won {
		if err != nil {
			e.Logger.Warn("notice mail not claimed", "notice", notice, "error", err)
		}
		return
	}
	if err := e.Mailer.Send(ctx, msg); err != nil {
		e.Logger.Warn("notice mail not sent", "notice", notice, "subject", msg.Subject, "error", err)
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer rcancel()
		if err := e.Svc.Store.InTx(rctx, func(tx *store.Tx) error { return tx.ReleaseNoticeMail(rctx, notice) }); err != nil {
			e.Logger.Warn("notice mail claim not given back", "notice", notice, "error", err)
		}
	}
}
