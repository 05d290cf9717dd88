package ottlevent

import (
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/component"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl"

	"github.com/otelcol-svc/otelcol-svc/internal/ottlpath"
)

// PathRef is a field of the record an expression names, as OTTL's parser resolved it
// (the parser hands every path of the expression to parsePath), with where the user
// wrote it and what it is compared with. The pipeline check warns with it about fields
// a project's records never had (internal/collector/validationresponder).
type PathRef struct {
	// Field is the top-level key, camelCase for an alias (severityNumber); Alt is the
	// alias as written (severity_number), which the path also reads when only a field
	// of that name is present.
	Field, Alt string
	// Keys are the literal keys below Field; Dynamic is set when a key after them is
	// computed per record (then only the part before it is known).
	Keys    []PathKey
	Dynamic bool
	// Text is the path as users write it.
	Text string
	// Line and Column (1-based) locate it in the expression; 0 when it was not found.
	Line, Column int
	// Compared is the JSON type ("string" or "number") of a literal the path is
	// compared with (==, !=, <, <=, >, >=), "" for none.
	Compared string
	// Target is set for the first argument of a statement's editor (set(x, ...),
	// delete_key(x, ...)): a field the statement writes rather than reads.
	Target bool
}

// PathKey is one literal key: a string, or an int (a list index).
type PathKey struct {
	S     string
	I     int64
	IsInt bool
}

// FieldsPaths are the path as the Fields view (internal/fieldstats) spells it, for
// Field and for Alt: members joined with dots, list indexes as "[]".
func (p PathRef) FieldsPaths() []string {
	var b strings.Builder
	for _, k := range p.Keys {
		if k.IsInt {
			b.WriteString("[]")
		} else {
			b.WriteString("." + k.S)
		}
	}
	out := []string{p.Field + b.String()}
	if p.Alt != "" {
		out = append(out, p.Alt+b.String())
	}
	return out
}

// Paths compiles expr (kind is KindCondition, KindStatement or KindValue) and returns
// the record fields it names, in the order they are written; the whole record (event)
// and signal are not fields and are left out. An expression that does not compile
// returns its *CompileError.
func Paths(kind, expr string, set component.TelemetrySettings) ([]PathRef, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, nil
	}
	var got []PathRef
	rd := reads{fields: map[string]bool{}, onPath: func(gs ottl.GetSetter[*Record]) {
		fp, ok := gs.(*fieldPath)
		if !ok || fp.root {
			return
		}
		ref := PathRef{Field: fp.field, Alt: fp.alt, Text: fp.text}
		for _, k := range fp.keys {
			if k.kind == keyDyn {
				ref.Dynamic = true
				break
			}
			ref.Keys = append(ref.Keys, PathKey{S: k.s, I: k.i, IsInt: k.kind == keyInt})
		}
		got = append(got, ref)
	}}
	p, err := newParser(set, &rd)
	if err != nil {
		return nil, err
	}
	rw := rewriteNames(expr)
	switch kind {
	case KindStatement:
		_, err = p.ParseStatement(rw.text)
	case KindValue:
		_, err = p.ParseValueExpression(rw.text)
	default:
		_, err = p.ParseCondition(rw.text)
	}
	if err != nil {
		return nil, compileError(kind, -1, expr, rw, err)
	}
	locatePaths(expr, kind == KindStatement, got)
	return got, nil
}

// Why by hand: OTTL does not export its syntax tree (participle's grammar types are
// internal to pkg/ottl), and the paths its parser hands over carry no position. So the
// expression is split into tokens here, each written path is read from them, and the
// parser's paths are matched to the written ones by what they name. The tokens around a
// path also tell whether it is compared with a literal, and whether it is the field a
// statement's editor writes.

type tokKind uint8

const (
	tIdent tokKind = iota
	tString
	tNumber
	tPunct
)

type token struct {
	kind tokKind
	text string
	off  int
}

func tokenize(expr string) []token {
	var out []token
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '"':
			j := i + 1
			for j < len(expr) && expr[j] != '"' {
				if expr[j] == '\\' {
					j++
				}
				j++
			}
			j = min(j+1, len(expr))
			out = append(out, token{tString, expr[i:j], i})
			i = j
		case c >= '0' && c <= '9':
			j := i
			for j < len(expr) && (isIdent(expr[j]) || expr[j] == '.') {
				j++
			}
			out = append(out, token{tNumber, expr[i:j], i})
			i = j
		case isIdent(c):
			j := i
			for j < len(expr) && isIdent(expr[j]) {
				j++
			}
			out = append(out, token{tIdent, expr[i:j], i})
			i = j
		default:
			j := i + 1
			if j < len(expr) && expr[j] == '=' && strings.IndexByte("=!<>", c) >= 0 {
				j++
			}
			out = append(out, token{tPunct, expr[i:j], i})
			i = j
		}
	}
	return out
}

// written is a path as it appears in the expression's tokens.
type written struct {
	field string // camelCase for an alias
	keys  []PathKey
	dyn   bool
	start int // token index of its first and one past its last token
	end   int
	used  bool
}

// notPaths reports OTTL's keywords, and the where of a statement's condition.
func notPaths(name string) bool { return name == "where" || ottlpath.Keyword(name) }

func writtenPaths(toks []token) []*written {
	var out []*written
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if t.kind != tIdent || notPaths(t.text) || (i > 0 && toks[i-1].text == ".") {
			continue
		}
		next := ""
		if i+1 < len(toks) {
			next = toks[i+1].text
		}
		if next == "(" || next == "=" {
			continue // a function, or a named argument
		}
		w := &written{field: t.text, start: i}
		j := i + 1
		if t.text == ContextName && next == "." && j+1 < len(toks) && toks[j+1].kind == tIdent {
			w.field = toks[j+1].text
			j += 2
		}
		var keys []PathKey
		for j < len(toks) && toks[j].text == "[" {
			depth, k := 0, j
			for ; k < len(toks); k++ {
				if toks[k].text == "[" {
					depth++
				} else if toks[k].text == "]" {
					depth--
					if depth == 0 {
						break
					}
				}
			}
			if k == j+2 && !w.dyn {
				switch lit := toks[j+1]; lit.kind {
				case tString:
					if s, err := strconv.Unquote(lit.text); err == nil {
						keys = append(keys, PathKey{S: s})
					} else {
						w.dyn = true
					}
				case tNumber:
					if n, err := strconv.ParseInt(lit.text, 10, 64); err == nil {
						keys = append(keys, PathKey{I: n, IsInt: true})
					} else {
						w.dyn = true
					}
				default:
					w.dyn = true
				}
			} else {
				w.dyn = true
			}
			j = min(k+1, len(toks))
		}
		if w.field == ContextName && t.text == ContextName {
			if len(keys) == 0 || keys[0].IsInt {
				i = j - 1
				continue // the whole record
			}
			w.field, keys = keys[0].S, keys[1:]
		} else if camel, ok := ottlpath.Field(w.field); ok {
			w.field = camel
		}
		w.keys, w.end = keys, j
		out = append(out, w)
		i = j - 1
	}
	return out
}

func sameKeys(a, b []PathKey) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

var comparisons = map[string]bool{"==": true, "!=": true, "<": true, "<=": true, ">": true, ">=": true}

// literalType is the JSON type of a literal starting at toks[i] ("-" then a number
// included), or "".
func literalType(toks []token, i int) string {
	if i < 0 || i >= len(toks) {
		return ""
	}
	switch toks[i].kind {
	case tString:
		return "string"
	case tNumber:
		return "number"
	}
	if toks[i].text == "-" && i+1 < len(toks) && toks[i+1].kind == tNumber {
		return "number"
	}
	return ""
}

func locatePaths(expr string, statement bool, refs []PathRef) {
	toks := tokenize(expr)
	ws := writtenPaths(toks)
	for r := range refs {
		ref := &refs[r]
		for _, w := range ws {
			if w.used || w.field != ref.Field || w.dyn != ref.Dynamic || !sameKeys(w.keys, ref.Keys) {
				continue
			}
			w.used = true
			ref.Line, ref.Column = lineCol(expr, toks[w.start].off)
			// path OP literal, or literal OP path (a literal before it may be negative).
			if w.end+1 < len(toks) && comparisons[toks[w.end].text] {
				ref.Compared = literalType(toks, w.end+1)
			}
			if ref.Compared == "" && w.start >= 2 && comparisons[toks[w.start-1].text] {
				lit := w.start - 2
				if lit >= 1 && toks[lit].kind == tNumber && toks[lit-1].text == "-" {
					lit--
				}
				ref.Compared = literalType(toks, lit)
			}
			// editor(path, ...): the statement's first token is the editor's name.
			ref.Target = statement && w.start == 2 && toks[1].text == "(" && toks[0].kind == tIdent
			break
		}
	}
}
