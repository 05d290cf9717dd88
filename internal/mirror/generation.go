package mirror

import (
	"context"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// Generation names the incarnation of the mirror's buckets: it changes when one is
// deleted and created again (a new or wiped NATS). The control plane publishes everything
// again when it changes, rather than rewriting every entry on a timer, which with
// thousands of projects made every data-plane process re-read them all every minute.
func (s *Store) Generation(ctx context.Context) (string, error) {
	var b strings.Builder
	for _, kv := range s.Watched() {
		st, err := kv.Status(ctx)
		if err != nil {
			return "", fmt.Errorf("bucket %s: %w", kv.Bucket(), err)
		}
		created := ""
		if bs, ok := st.(*jetstream.KeyValueBucketStatus); ok {
			created = bs.StreamInfo().Created.UTC().Format("20060102T150405.000000000")
		}
		fmt.Fprintf(&b, "%s@%s;", kv.Bucket(), created)
	}
	return b.String(), nil
}
