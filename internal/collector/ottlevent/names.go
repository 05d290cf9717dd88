package ottlevent

import (
	"regexp"
	"strings"
)

// OTTL's lexer reads a path segment only as [a-z][a-z0-9_]*, yet the flat record's
// own field names are camelCase (traceId, severityNumber, durationMs) and the
// envelope's start with an underscore (_event_type), and docs/contract.md#section-6 promises
// that such a name written bare (the group key `traceId`) means event["name"]. So
// before parsing, a bare name OTTL cannot read is rewritten to event["name"]; `event.`
// in front of it is absorbed. Everything else is left to OTTL, and positions in its
// error messages are mapped back to the text the user wrote.

// edit is one rewritten span: expr[origStart:origEnd] became text[newStart:newEnd].
type edit struct {
	origStart, origEnd, newStart, newEnd int
}

type rewritten struct {
	text  string
	edits []edit
	// dotted is the first a.fooBar left alone, which OTTL will refuse: worth a hint.
	dotted [2]string
}

// lambdaParams finds the local identifiers of lambdas ("(a, b) =>" and "a =>"),
// which are not record fields.
var lambdaParams = regexp.MustCompile(`\(([^()]*)\)\s*=>|\b([A-Za-z_][A-Za-z0-9_]*)\s*=>`)

func rewriteNames(expr string) rewritten {
	if !strings.ContainsAny(expr, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_") {
		return rewritten{text: expr} // the common case: nothing to look at
	}
	locals := map[string]bool{}
	for _, m := range lambdaParams.FindAllStringSubmatch(expr, -1) {
		for _, p := range strings.Split(m[1]+","+m[2], ",") {
			locals[strings.TrimSpace(p)] = true
		}
	}
	var b strings.Builder
	var rw rewritten
	copied := 0
	for i := 0; i < len(expr); {
		c := expr[i]
		if c == '"' { // skip a string literal
			i++
			for i < len(expr) && expr[i] != '"' {
				if expr[i] == '\\' {
					i++
				}
				i++
			}
			i++
			continue
		}
		if !isIdent(c) {
			i++
			continue
		}
		start := i
		for i < len(expr) && isIdent(expr[i]) {
			i++
		}
		name := expr[start:i]
		if !needsQuoting(name) || locals[name] || (start > 0 && isIdent(expr[start-1])) {
			continue
		}
		// A name followed by "(" is a function, by a single "=" a named argument.
		rest := strings.TrimLeft(expr[i:], " \t\r\n")
		if strings.HasPrefix(rest, "(") || (strings.HasPrefix(rest, "=") && !strings.HasPrefix(rest, "==") && !strings.HasPrefix(rest, "=>")) {
			continue
		}
		from := start
		if start > 0 && expr[start-1] == '.' {
			// Only event.name is ours; a.fooBar is left for OTTL to refuse.
			p := start - 1 - len(ContextName)
			if p < 0 || expr[p:start-1] != ContextName || (p > 0 && (isIdent(expr[p-1]) || expr[p-1] == '.')) {
				if rw.dotted[1] == "" {
					q := start - 1
					for q > 0 && isIdent(expr[q-1]) {
						q--
					}
					rw.dotted = [2]string{expr[q : start-1], name}
				}
				continue
			}
			from = p
		}
		b.WriteString(expr[copied:from])
		newStart := b.Len()
		b.WriteString(`event["`)
		b.WriteString(name)
		b.WriteString(`"]`)
		rw.edits = append(rw.edits, edit{origStart: from, origEnd: i, newStart: newStart, newEnd: b.Len()})
		copied = i
	}
	if len(rw.edits) == 0 {
		rw.text = expr
		return rw
	}
	b.WriteString(expr[copied:])
	rw.text = b.String()
	return rw
}

// needsQuoting reports whether OTTL's lexer cannot read name as a path segment:
// camelCase, or a leading underscore. Names starting with an uppercase letter are
// converters and enums, and stay as they are.
func needsQuoting(name string) bool {
	switch c := name[0]; {
	case c == '_':
		return len(name) > 1
	case c >= 'a' && c <= 'z':
		return strings.ContainsAny(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
	}
	return false
}

// origOffset maps an offset in the rewritten text back to the user's text.
func (rw rewritten) origOffset(n int) int {
	delta := 0
	for _, e := range rw.edits {
		if n < e.newStart {
			break
		}
		if n < e.newEnd {
			return e.origStart
		}
		delta = e.newEnd - e.origEnd
	}
	return n - delta
}
