package service

import (
	"context"
	"fmt"
	"time"

	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

// MirrorGeneration is the mirror's buckets' incarnation (mirror.Store.Generation).
func (s *Service) MirrorGeneration(ctx context.Context) (string, error) {
	ms, _, err := s.Mirror(ctx)
	if err != nil {
		return "", err
	}
	return ms.Generation(ctx)
}

// Resync re-publishes the whole configuration to the mirror and deletes what the database
// no longer has: a new or wiped NATS recovers, and a change whose commit failed after its
// mirror write is undone.
func (s *Service) Resync(ctx context.Context) error {
	ms, _, err := s.Mirror(ctx)
	if err != nil {
		return err
	}
	if s.ConsoleKey != nil {
		// Receivers verify console tokens with this public key.
		if err := ms.PutConsoleKeys(ctx, s.ConsolePublicKeys()); err != nil {
			return err
		}
	}
	// Every revocation in force, first: the console tokens of a credential revoked while
	// NATS was unreachable are ended by nothing else if the control plane that revoked it
	// stopped since, and those of one revoked before a wipe of NATS are back in force.
	// (The prune below lists only keys, sources and projects: it never deletes one.)
	revs, err := s.revocationsInForce(ctx, false)
	if err != nil {
		return err
	}
	if left, err := s.publishRevocations(ctx, revs); left > 0 {
		return fmt.Errorf("publish revocations: %w", err)
	}
	// What the mirror holds is listed before the database is read: an entry the API adds
	// meanwhile is then either in the database snapshot or not in the listing, and never
	// pruned (listing after the snapshot removed keys created during a re-publish).
	had := map[string][]string{}
	for _, b := range []string{mirror.BucketKeys, mirror.BucketSources, mirror.BucketProjects} {
		if had[b], err = ms.List(ctx, b); err != nil {
			return fmt.Errorf("list %s: %w", b, err)
		}
	}
	var projects []store.Project
	var sinks [][]store.Sink
	var members map[string]map[string]store.Grant
	var keys []store.Key
	var sources []store.Source
	var backlogs map[string]store.Backlog
	err = s.Store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		if projects, err = tx.AllProjects(ctx); err != nil {
			return err
		}
		for _, p := range projects {
			sk, err := tx.Sinks(ctx, p.ID)
			if err != nil {
				return err
			}
			sinks = append(sinks, sk)
		}
		if members, err = tx.AllMemberGrants(ctx); err != nil {
			return err
		}
		if keys, err = tx.AllKeys(ctx); err != nil {
			return err
		}
		if sources, err = tx.AllSources(ctx); err != nil {
			return err
		}
		backlogs, err = tx.LatestBacklogs(ctx)
		return err
	})
	if err != nil {
		return err
	}
	if s.afterSnapshot != nil {
		s.afterSnapshot()
	}
	// An entry the snapshot has but the API deleted since is not brought back: each is
	// written only while its row is held (publishHeld), so a revoked key stays revoked.
	owner := map[string]string{}
	gen := "" // the mirror's generation, read for the first project with a backlog
	wantProjects := map[string]bool{}
	byProject := map[string]int{}
	ids := make([]string, 0, len(projects))
	for i, p := range projects {
		owner[p.ID] = p.OwnerID
		wantProjects[p.ID] = true
		byProject[p.ID] = i
		ids = append(ids, p.ID)
	}
	err = s.publishHeld(ctx, "projects", "id", ids, func(id string) error {
		i := byProject[id]
		p := projects[i]
		mp := mirrorProject(p, sinks[i], members[p.ID])
		var err error
		if b, ok := backlogs[p.ID]; ok {
			// A backlog asked for on a NATS since wiped is left out (mirrorBacklog).
			if gen == "" {
				if gen, err = ms.Generation(ctx); err != nil {
					return err
				}
			}
			if mp.Backlog, err = mirrorBacklog(ctx, ms, b, gen); err != nil {
				return err
			}
		}
		return ms.PutProjectIfNewer(ctx, mp)
	})
	if err != nil {
		return err
	}
	wantKeys := map[string]bool{}
	byHash := map[string]store.Key{}
	hashes := make([]string, 0, len(keys))
	for _, k := range keys {
		wantKeys[k.Hash] = true
		byHash[k.Hash] = k
		hashes = append(hashes, k.Hash)
	}
	err = s.publishHeld(ctx, "api_keys", "hash", hashes, func(h string) error {
		k := byHash[h]
		return ms.PutKey(ctx, k.Hash, mirrorKey(k, owner[k.ProjectID]))
	})
	if err != nil {
		return err
	}
	wantSources := map[string]bool{}
	byIngest := map[string]store.Source{}
	ingest := make([]string, 0, len(sources))
	for _, src := range sources {
		wantSources[src.IngestKey] = true
		byIngest[src.IngestKey] = src
		ingest = append(ingest, src.IngestKey)
	}
	err = s.publishHeld(ctx, "sources", "ingest_key", ingest, func(k string) error {
		return ms.PutSource(ctx, k, byIngest[k].Config)
	})
	if err != nil {
		return err
	}
	young := func(bucket string) func(context.Context, string) (bool, error) {
		return func(ctx context.Context, key string) (bool, error) {
			at, ok, err := ms.Written(ctx, bucket, key)
			return ok && time.Since(at) < s.PruneGrace, err
		}
	}
	if err := prune(ctx, had[mirror.BucketKeys], wantKeys, young(mirror.BucketKeys), ms.DeleteKey); err != nil {
		return err
	}
	if err := prune(ctx, had[mirror.BucketSources], wantSources, young(mirror.BucketSources), ms.DeleteSource); err != nil {
		return err
	}
	if err := prune(ctx, had[mirror.BucketProjects], wantProjects, young(mirror.BucketProjects), ms.DeleteProject); err != nil {
		return err
	}
	s.Logger.Debug("configuration mirror re-published", "projects", len(projects), "keys", len(keys), "sources", len(sources))
	return nil
}

// publishHeld calls put for each of vals still in the database, in transactions of up
// to publishChunk rows that hold those rows while put writes the mirror (store.Tx.Present):
// the API deletes a row before its mirror entry, so a delete racing this publish either
// waits and removes the entry after put, or commits first and put is skipped. Chunks keep
// a delete's wait short and a large re-publish from holding thousands of rows.
func (s *Service) publishHeld(ctx context.Context, table, col string, vals []string, put func(string) error) error {
	for len(vals) > 0 {
		chunk := vals[:min(publishChunk, len(vals))]
		vals = vals[len(chunk):]
		err := s.Store.InTx(ctx, func(tx *store.Tx) error {
			there, err := tx.Present(ctx, table, col, chunk)
			if err != nil {
				return err
			}
			for _, v := range chunk {
				if !there[v] {
					continue
				}
				if err := put(v); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("publish %s: %w", table, err)
		}
	}
	return nil
}

const publishChunk = 200

// prune deletes the entries the mirror had before the database was read that the
// database does not know, unless young says they were written within Service.PruneGrace.
// The API writes the mirror and then commits: an entry of a change in flight is in the
// mirror's listing but not yet in the database snapshot, and pruning it lost the change
// from the data plane until the next full publish (hours). Past the grace such a
// transaction has committed or failed; a minute also absorbs a clock difference between
// the control plane and NATS. (Found by TestHundredProjectsOnTheEmbeddedDefault, which
// creates projects during the first publish.)
func prune(ctx context.Context, had []string, want map[string]bool, young func(context.Context, string) (bool, error), del func(context.Context, string) error) error {
	for _, k := range had {
		if want[k] {
			continue
		}
		recent, err := young(ctx, k)
		if err != nil {
			return err
		}
		if recent {
			continue
		}
		if err := del(ctx, k); err != nil {
			return err
		}
	}
	return nil
}
