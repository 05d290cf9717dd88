package agentbody

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// previewBytes is how much of an oversized record its marker shows.
const previewBytes = 1024

// FitWindow cuts a window (oldest first) to maxBytes of encoded JSON array, keeping the
// newest records: an agent reasons about what just happened, and a model's context has
// room for only so much. A record larger than maxBytes on its own is replaced by a
// marker rather than sent whole, so one huge record cannot crowd out the rest. It
// returns the records to send (oldest first) and how many of them are markers.
func FitWindow(window [][]byte, maxBytes int) (kept [][]byte, markers int) {
	size := 2 // []
	start := len(window)
	var replaced map[int][]byte
	for i := len(window) - 1; i >= 0; i-- {
		rec := window[i]
		if len(rec) > maxBytes {
			rec = marker(rec)
			if replaced == nil {
				replaced = map[int][]byte{}
			}
			replaced[i] = rec
		}
		add := len(rec)
		if i < len(window)-1 {
			add++ // the comma
		}
		if size+add > maxBytes {
			delete(replaced, i)
			break
		}
		size += add
		start = i
	}
	if len(replaced) == 0 {
		return window[start:], 0
	}
	kept = make([][]byte, 0, len(window)-start)
	for i := start; i < len(window); i++ {
		if r, ok := replaced[i]; ok {
			kept = append(kept, r)
			continue
		}
		kept = append(kept, window[i])
	}
	return kept, len(replaced)
}

// Marker is marker, for a body too large to keep whole anywhere (a dead letter of a
// call over the call body limit).
func Marker(rec []byte) []byte { return marker(rec) }

// marker stands in for an oversized record: its size and its first KiB, as a string
// (valid UTF-8: a rune cut at the boundary is dropped).
func marker(rec []byte) []byte {
	p := rec
	if len(p) > previewBytes {
		p = p[:previewBytes]
		for i := 0; i < utf8.UTFMax-1 && len(p) > 0; i++ {
			if r, _ := utf8.DecodeLastRune(p); r != utf8.RuneError {
				break
			}
			p = p[:len(p)-1]
		}
	}
	// Strings always marshal; invalid UTF-8 becomes U+FFFD. With the worst escaping
	// (\u00XX for every byte) the marker stays under pipelinecfg.MinWindowMaxBytes.
	preview, _ := json.Marshal(string(p))
	b := make([]byte, 0, len(preview)+64)
	b = append(b, `{"_truncated":true,"_bytes":`...)
	b = strconv.AppendInt(b, int64(len(rec)), 10)
	b = append(b, `,"_preview":`...)
	b = append(b, preview...)
	return append(b, '}')
}
