package api

import (
	"context"
	"fmt"

	"github.com/otelcol-svc/otelcol-svc/components/mirror"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
)

// Resync re-publishes the whole configuration to the mirror and deletes what the database
// no longer has: a new or wiped NATS recovers, and a change whose commit failed after its
// mirror write is undone.
func (s *Server) Resync(ctx context.Context) error {
	ms, _, err := s.Mirror(ctx)
	if err != nil {
		return err
	}
	if s.ConsoleKey != nil {
		// Receivers verify console tokens with this public key.
		if err := ms.PutConsoleKeys(ctx, s.consolePublicKeys()); err != nil {
			return err
		}
	}
	var projects []store.Project
	var sinks [][]store.Sink
	var keys []store.Key
	var sources []store.Source
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
		if keys, err = tx.AllKeys(ctx); err != nil {
			return err
		}
		sources, err = tx.AllSources(ctx)
		return err
	})
	if err != nil {
		return err
	}
	owner := map[string]string{}
	wantProjects := map[string]bool{}
	for i, p := range projects {
		owner[p.ID] = p.OwnerID
		wantProjects[p.ID] = true
		if err := ms.PutProject(ctx, mirrorProject(p, sinks[i])); err != nil {
			return err
		}
	}
	wantKeys := map[string]bool{}
	for _, k := range keys {
		wantKeys[k.Hash] = true
		if err := ms.PutKey(ctx, k.Hash, mirrorKey(k, owner[k.ProjectID])); err != nil {
			return err
		}
	}
	wantSources := map[string]bool{}
	for _, src := range sources {
		wantSources[src.IngestKey] = true
		if err := ms.PutSource(ctx, src.IngestKey, src.Config); err != nil {
			return err
		}
	}
	if err := prune(ctx, ms, mirror.BucketKeys, wantKeys, ms.DeleteKey); err != nil {
		return err
	}
	if err := prune(ctx, ms, mirror.BucketSources, wantSources, ms.DeleteSource); err != nil {
		return err
	}
	if err := prune(ctx, ms, mirror.BucketProjects, wantProjects, ms.DeleteProject); err != nil {
		return err
	}
	s.Logger.Debug("configuration mirror re-published", "projects", len(projects), "keys", len(keys), "sources", len(sources))
	return nil
}

func prune(ctx context.Context, ms *mirror.Store, bucket string, want map[string]bool, del func(context.Context, string) error) error {
	have, err := ms.List(ctx, bucket)
	if err != nil {
		return fmt.Errorf("list %s: %w", bucket, err)
	}
	for _, k := range have {
		if !want[k] {
			if err := del(ctx, k); err != nil {
				return err
			}
		}
	}
	return nil
}
