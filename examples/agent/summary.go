package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// record holds the fields of a flat record (docs/contract.md#section-4) the summary reads. Log
// records carry severity and body; spans a status; events whatever the sender put in
// them, so message/error/status are tried too.
type record struct {
	SeverityNumber     int             `json:"severityNumber"`
	SeverityText       string          `json:"severityText"`
	Body               string          `json:"body"`
	Name               string          `json:"name"`
	Status             json.RawMessage `json:"status"`
	Message            string          `json:"message"`
	Error              string          `json:"error"`
	ResourceAttributes map[string]any  `json:"resourceAttributes"`
	Service            string          `json:"service"`
}

// Result is what the agent sends back: text for chat destinations, the numbers for
// webhooks.
type Result struct {
	Text     string   `json:"text"`
	Errors   int      `json:"errors"`
	Records  int      `json:"records"`
	Services []string `json:"services"`
	Top      []string `json:"top_messages"`
}

// summarise turns the records of one call into a short incident note: how many are
// errors, from which services, and the most frequent messages. No LLM: a deterministic
// stand-in that shows the loop working end to end.
func summarise(records []json.RawMessage) Result {
	services := map[string]bool{}
	counts := map[string]int{}
	var res Result
	for _, raw := range records {
		var r record
		if json.Unmarshal(raw, &r) != nil {
			continue
		}
		res.Records++
		if !isError(r) {
			continue
		}
		res.Errors++
		if s := service(r); s != "" {
			services[s] = true
		}
		if m := message(r); m != "" {
			counts[m]++
		}
	}
	for s := range services {
		res.Services = append(res.Services, s)
	}
	sort.Strings(res.Services)
	res.Top = top(counts, 3)
	res.Text = text(res)
	return res
}

func isError(r record) bool {
	if r.SeverityNumber >= 17 || strings.EqualFold(r.SeverityText, "error") || strings.EqualFold(r.SeverityText, "fatal") {
		return true
	}
	if r.Error != "" {
		return true
	}
	var st struct{ Code string }
	// The receiver stores a span's status code as "error" (docs/contract.md#section-4); the
	// OTLP enum name is accepted too, for records from elsewhere.
	if json.Unmarshal(r.Status, &st) == nil && (st.Code == "error" || st.Code == "STATUS_CODE_ERROR") {
		return true
	}
	var s string
	return json.Unmarshal(r.Status, &s) == nil && (s == "error" || s == "failed")
}

func service(r record) string {
	if s, ok := r.ResourceAttributes["service.name"].(string); ok {
		return s
	}
	return r.Service
}

func message(r record) string {
	for _, m := range []string{r.Body, r.Message, r.Error, r.Name} {
		if m != "" {
			return m
		}
	}
	return ""
}

func top(counts map[string]int, n int) []string {
	msgs := make([]string, 0, len(counts))
	for m := range counts {
		msgs = append(msgs, m)
	}
	sort.Slice(msgs, func(i, j int) bool {
		if counts[msgs[i]] != counts[msgs[j]] {
			return counts[msgs[i]] > counts[msgs[j]]
		}
		return msgs[i] < msgs[j]
	})
	if len(msgs) > n {
		msgs = msgs[:n]
	}
	for i, m := range msgs {
		msgs[i] = fmt.Sprintf("%s (×%d)", m, counts[m])
	}
	return msgs
}

func text(r Result) string {
	if r.Errors == 0 {
		return fmt.Sprintf("No errors in %d %s.", r.Records, plural(r.Records, "record"))
	}
	where := "an unnamed service"
	if len(r.Services) > 0 {
		where = strings.Join(r.Services, ", ")
	}
	s := fmt.Sprintf("%d %s in %s", r.Errors, plural(r.Errors, "error"), where)
	if len(r.Top) > 0 {
		s += ": " + strings.Join(r.Top, "; ")
	}
	return s
}

func plural(n int, w string) string {
	if n == 1 {
		return w
	}
	return w + "s"
}
