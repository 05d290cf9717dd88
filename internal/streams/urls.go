package streams

import (
	"net/url"
	"strings"
)

// SplitURLs splits a NATS server list ("nats://a:4222,nats://b:4222"), as NATS_URL and
// the components' nats.url hold it.
func SplitURLs(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// RedactURLs is a NATS server list as logs and status pages may show it: each URL's
// password (or token, in the user part) replaced, so credentials put in NATS_URL never
// reach a log.
func RedactURLs(s string) string {
	parts := SplitURLs(s)
	for i, p := range parts {
		if pu, err := url.Parse(strings.TrimSpace(p)); err == nil && pu.User != nil {
			if _, hasPass := pu.User.Password(); hasPass {
				parts[i] = pu.Redacted()
			} else {
				// nats://<token>@host: the user part alone is the secret.
				pu.User = url.User("redacted")
				parts[i] = pu.String()
			}
		}
	}
	return strings.Join(parts, ",")
}
