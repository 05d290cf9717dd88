package textfmt

import (
	"strings"
)

// A result's author writes what the payload says, and a chat message must not let it
// pass one thing off as another: a masked link ("click" leading to
// https://evil.example) is shown with its real address, and bidirectional control
// characters, which reorder what is shown (a right-to-left override makes "exe.pdf"
// of "fdp.exe"), are removed, on every platform.

// isBidiControl reports whether r is a Unicode bidirectional formatting character: the
// embeddings, overrides and isolates, and the implicit marks (Unicode UAX #9, 2.1-2.6).
func isBidiControl(r rune) bool {
	switch {
	case r == 0x061C, r == 0x200E, r == 0x200F:
		return true
	case r >= 0x202A && r <= 0x202E:
		return true
	case r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// stripBidi removes bidirectional control characters.
func stripBidi(s string) string {
	if strings.IndexFunc(s, isBidiControl) < 0 {
		return s
	}
	return strings.Map(func(r rune) rune {
		if isBidiControl(r) {
			return -1
		}
		return r
	}, s)
}

// showLinks rewrites the masked links of m's text that the payload had a hand in (their
// text or their address came from it) so that the platform shows their address. Links a
// template writes in full, with no placeholder in them, are the sink owner's and kept.
func showLinks(platform string, m message) string {
	if len(m.spans) == 0 {
		return m.text
	}
	switch platform {
	case Slack:
		return showSlackLinks(m.text, m.spans)
	case Discord:
		if m.fenced {
			return m.text // inside a code block Discord renders no link
		}
	}
	// Teams' Adaptive Card TextBlock knows no code block: its links render anywhere.
	return showMarkdownLinks(m.text, m.spans)
}

// overlaps reports whether [a, b) meets any of the sorted spans.
func overlaps(spans [][2]int, a, b int) bool {
	for _, s := range spans {
		if s[0] >= b {
			return false
		}
		if s[1] > a && s[0] < b {
			return true
		}
	}
	return false
}

// showMarkdownLinks breaks each "](" of Markdown (Discord, Teams) that could join a
// [label](address) link the payload had a hand in, by putting a space between "]" and
// "(": "[click] (https://evil.example)" is no link on either platform, and shows the
// address, which both then link as a plain URL.
//
// Platforms parse links differently (Discord takes "[a]]](x)" and "[x](https://e(vil)"
// as links, CommonMark neither), so the test is wide: a "](" is left alone only when
// no payload text lies between the text's first "[" and the ")" that could close the
// address, whichever ")" a parser picks (the first one after it, or the one matching its
// "("). A template's own link before any payload text is so kept; after payload text
// that holds a "[", it is shown with its address too. Parentheses are matched in two
// passes, so a hostile text costs linear time.
func showMarkdownLinks(s string, spans [][2]int) string {
	first := strings.IndexByte(s, '[')
	if first < 0 || !strings.Contains(s[first:], "](") {
		return s
	}
	// next[i] is the first ")" at or after i, -1 when there is none.
	next := make([]int32, len(s)+1)
	next[len(s)] = -1
	for i := len(s) - 1; i >= 0; i-- {
		next[i] = next[i+1]
		if s[i] == ')' {
			next[i] = int32(i)
		}
	}
	matched := matchParens(s)
	var breaks []int
	for i := first; i+1 < len(s); i++ {
		if s[i] != ']' || s[i+1] != '(' || next[i+1] < 0 {
			continue
		}
		end := int(next[i+1])
		if m, ok := matched[i+1]; ok && m > end {
			end = m
		}
		if overlaps(spans, first, end+1) {
			breaks = append(breaks, i)
		}
	}
	if len(breaks) == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + len(breaks))
	prev := 0
	for _, i := range breaks {
		b.WriteString(s[prev : i+1])
		b.WriteByte(' ')
		prev = i + 1
	}
	b.WriteString(s[prev:])
	return b.String()
}

// matchParens maps each "(" of s to its matching ")".
func matchParens(s string) map[int]int {
	m := map[int]int{}
	var open []int
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			open = append(open, i)
		case ')':
			if len(open) > 0 {
				m[open[len(open)-1]] = i
				open = open[:len(open)-1]
			}
		}
	}
	return m
}

// showSlackLinks rewrites each Slack link <address|label> that meets a span as
// "label (<address>)", which Slack shows with the address. Only a template writes "<"
// (the payload's are escaped), so every sequence is the template's; mentions and
// channel links (<!here>, <@U123>, <#C123|name>) are left as the template wrote them.
func showSlackLinks(s string, spans [][2]int) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); i++ {
		if s[i] != '<' {
			continue
		}
		end := strings.IndexByte(s[i:], '>')
		if end < 0 {
			break
		}
		end += i
		inner := s[i+1 : end]
		bar := strings.IndexByte(inner, '|')
		if bar < 0 || inner == "" || strings.ContainsRune("!@#", rune(inner[0])) || !overlaps(spans, i, end+1) {
			i = end
			continue
		}
		address, label := inner[:bar], strings.TrimSpace(inner[bar+1:])
		b.WriteString(s[last:i])
		if label != "" && label != address {
			b.WriteString(label)
			b.WriteString(" (")
		}
		b.WriteString("<" + address + ">")
		if label != "" && label != address {
			b.WriteString(")")
		}
		last = end + 1
		i = end
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}
