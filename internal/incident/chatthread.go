package incident

import (
	"context"
	"errors"
)

// ReplaceChatThread makes t the thread of destination sinkID in place of old (its root
// was deleted in Slack and posted again). It changes nothing when the destination's
// thread is no longer old: another process replaced it first, and that one stays.
func (s *Store) ReplaceChatThread(ctx context.Context, project, id, sinkID string, old, t ChatThread) error {
	if sinkID == "" {
		return errors.New("incident: chat thread without a destination id")
	}
	t.Channel, t.TS = cut(t.Channel, 128), cut(t.TS, 64)
	_, _, err := s.updateByID(ctx, project, id, func(cur *Incident, _ bool) (bool, error) {
		if got, ok := cur.Chat[sinkID]; !ok || got.Channel != old.Channel || got.TS != old.TS {
			return false, nil
		}
		cur.Chat[sinkID] = t
		return true, nil
	})
	return err
}
