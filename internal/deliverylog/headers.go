package deliverylog

import (
	"net/http"
	"sort"
	"strings"
)

// Redacted stands for a header value the log does not keep.
const Redacted = "[redacted]"

// Bounds on the request headers one attempt keeps: the attempt log is capped, and so is
// what each of its entries holds.
const (
	MaxHeaders     = 32
	MaxHeaderName  = 128
	MaxHeaderValue = 512
)

// shownHeaders are the headers whose values the log keeps: the service sets them, and
// none is a credential. Every other value is Redacted: Authorization, X-API-Key, cookies,
// the webhook signature, and any header a destination's configuration adds, whatever its
// name (X-Pass or X-Cert carry credentials as well as Authorization does, and no list of
// names finds them all; the control plane shows members none of their values either).
// The log is read with any console credential of the project, an API key among them, so
// a secret is never written to it rather than hidden when read.
var shownHeaders = map[string]bool{
	"Content-Type":      true,
	"Content-Length":    true,
	"User-Agent":        true,
	"X-Request-Id":      true,
	"Traceparent":       true,
	"Webhook-Id":        true,
	"Webhook-Timestamp": true,
}

// LogHeaders is what an attempt's log keeps of the headers it sent: every name (at most
// MaxHeaders, in order), the values of the service's own non-secret headers, and
// Redacted for the rest. configured are the headers the destination's configuration
// adds: a value that came from there is always Redacted, even under a name the service
// shows (a destination may set its own X-Request-Id), unless the service replaced it.
func LogHeaders(sent http.Header, configured map[string]string) map[string]string {
	if len(sent) == 0 {
		return nil
	}
	var fromConfig map[string]string
	if len(configured) > 0 {
		fromConfig = make(map[string]string, len(configured))
		for k, v := range configured {
			fromConfig[http.CanonicalHeaderKey(k)] = v
		}
	}
	out := make(map[string]string, min(len(sent), MaxHeaders))
	keep := func(k string, vs []string) {
		name := http.CanonicalHeaderKey(k)
		v := ""
		if len(vs) == 1 {
			v = vs[0]
		} else {
			v = strings.Join(vs, ", ")
		}
		cv, configuredHere := fromConfig[name]
		if !shownHeaders[name] || (configuredHere && cv == v) {
			v = Redacted
		}
		out[capString(name, MaxHeaderName)] = capString(v, MaxHeaderValue)
	}
	if len(sent) <= MaxHeaders {
		// All are kept, and with canonical names (http.Header.Set's) no two become one:
		// no order to choose them by, so the sort is skipped where it decides nothing
		// (every attempt logs its headers).
		canonical := true
		for k, vs := range sent {
			if http.CanonicalHeaderKey(k) != k {
				canonical = false
				break
			}
			keep(k, vs)
		}
		if canonical {
			return out
		}
		clear(out)
	}
	names := make([]string, 0, len(sent))
	for k := range sent {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if len(out) == MaxHeaders {
			break
		}
		keep(k, sent[k])
	}
	return out
}

// boundHeaders keeps an attempt's headers within the bounds above, whoever built them.
func boundHeaders(h map[string]string) map[string]string {
	if len(h) == 0 {
		return nil
	}
	ok := len(h) <= MaxHeaders
	for k, v := range h {
		if len(k) > MaxHeaderName || len(v) > MaxHeaderValue {
			ok = false
		}
	}
	if ok {
		return h
	}
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	out := make(map[string]string, min(len(names), MaxHeaders))
	for _, k := range names[:min(len(names), MaxHeaders)] {
		out[capString(k, MaxHeaderName)] = capString(h[k], MaxHeaderValue)
	}
	return out
}
