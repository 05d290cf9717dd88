package console

import (
	"net/url"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/fieldstats"
)

// GET /console/v1/projects/{project_id}/fields?limit=100&source_id=<id>: the field paths
// of the project's newest records, what a user can write triggers against.
const (
	defaultFieldsLimit = 100
	maxFieldsLimit     = 1000
)

func fieldsEndpoint() endpoint {
	return endpoint{name: "fields", parse: query(func(q url.Values) (readFunc, *apierror.Error) {
		return recentRecords(q, defaultFieldsLimit, maxFieldsLimit, func(limit int) view {
			return &fieldsView{stats: fieldstats.New(), limit: limit, maxBytes: maxReadBytes}
		})
	})}
}

// FieldStat is one path of the Fields view (internal/fieldstats, shared with the data
// plane's pipeline check).
type FieldStat = fieldstats.Field

// fieldsView walks each record as it arrives and keeps only the field statistics. Within
// a window it samples the oldest records first: with a source filter (windows of many
// sequences) the sample is of recent records rather than strictly the newest.
type fieldsView struct {
	stats           *fieldstats.Stats
	limit, maxBytes int
	bytes           int
	truncated       bool // sampling stopped at the byte budget
}

func (v *fieldsView) need() int {
	if v.truncated {
		return 0
	}
	return v.limit - v.stats.Sampled()
}

func (v *fieldsView) take(rec storedRecord) {
	if v.truncated || v.stats.Sampled() >= v.limit {
		return
	}
	if v.bytes+len(rec.data) > v.maxBytes {
		v.truncated = true
		return
	}
	v.bytes += len(rec.data)
	v.stats.Add(rec.data)
}

func (v *fieldsView) endWindow() {}

func (v *fieldsView) answer() any {
	body := map[string]any{"sampled": v.stats.Sampled(), "fields": v.stats.Result()}
	if v.truncated || v.stats.Truncated() {
		body["truncated"] = true
	}
	return body
}
