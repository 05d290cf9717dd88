package ottlevent

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl"

	"github.com/otelcol-svc/otelcol-svc/internal/collector/records"
)

// Kinds of expression, as named in a CompileError.
const (
	KindCondition = "condition"
	KindStatement = "statement"
	KindValue     = "value"
)

// CompileError is an expression that does not compile. The control plane shows it to
// the user who saved the pipeline ("400 invalid_pipeline"), naming the field; this
// error names the statement within a list and the position within the expression.
type CompileError struct {
	Kind  string // KindCondition, KindStatement or KindValue
	Index int    // 0-based index of the statement in its list; -1 for a lone expression
	Expr  string
	// Line and Column (1-based) locate the problem in Expr; 0 when OTTL gives no
	// position and the offending name could not be found in Expr.
	Line, Column int
	Err          error
}

func (e *CompileError) Error() string {
	var b strings.Builder
	b.WriteString(e.Kind)
	if e.Index >= 0 {
		fmt.Fprintf(&b, " %d", e.Index)
	}
	fmt.Fprintf(&b, " %q", e.Expr)
	msg := e.Err.Error()
	if e.Line > 0 && !strings.Contains(msg, fmt.Sprintf("%d:%d", e.Line, e.Column)) {
		fmt.Fprintf(&b, " at %d:%d", e.Line, e.Column)
	}
	b.WriteString(": ")
	b.WriteString(msg)
	return b.String()
}

func (e *CompileError) Unwrap() error { return e.Err }

// EvalError is a statement that failed on one record. The record's other statements
// still ran.
type EvalError struct {
	Index int // 0-based index of the statement
	Expr  string
	Err   error
}

func (e *EvalError) Error() string {
	return fmt.Sprintf("statement %d %q: %v", e.Index, e.Expr, e.Err)
}

func (e *EvalError) Unwrap() error { return e.Err }

// newParser returns a parser whose paths have no context prefix. OTTL's own contexts
// enable context names (log.body), which makes a bare path an error; here the bare
// path is the primary syntax (docs/contract.md#section-6), and `event.` remains accepted as
// a plain first segment that parsePath strips.
func newParser(set component.TelemetrySettings, rd *reads) (ottl.Parser[*Record], error) {
	if set.Logger == nil {
		set.Logger = zap.NewNop()
	}
	parse := func(path ottl.Path[*Record]) (ottl.GetSetter[*Record], error) {
		gs, err := parsePath(path)
		if err == nil {
			rd.note(gs)
		}
		return gs, err
	}
	return ottl.NewParser(functions(), parse, set, ottl.WithEnumParser[*Record](parseEnum))
}

// reads collects the top-level fields an expression's paths read, so a record can be
// decoded in part to evaluate it (DecodeRecordFields). all is set when a path reaches
// the whole record (event) or a field named at run time (event[expr]).
type reads struct {
	fields map[string]bool
	// set is fields with the keys read below them (ReadSet).
	set readNode
	all bool
	// onPath, when set, sees every path the parser resolved (Paths, paths.go).
	onPath func(ottl.GetSetter[*Record])
}

func (rd *reads) note(gs ottl.GetSetter[*Record]) {
	if rd.onPath != nil {
		rd.onPath(gs)
	}
	switch p := gs.(type) {
	case signalPath:
	case *fieldPath:
		if p.root {
			rd.all = true
			return
		}
		rd.fields[p.field] = true
		if rd.set == nil {
			rd.set = readNode{}
		}
		rd.set.add(p.field, p.keys)
		if p.alt != "" {
			rd.fields[p.alt] = true
			rd.set.add(p.alt, p.keys)
		}
	default:
		rd.all = true
	}
}

func compileError(kind string, index int, expr string, rw rewritten, err error) *CompileError {
	msg := strings.ReplaceAll(err.Error(), recordTypeArg, "")
	ce := &CompileError{Kind: kind, Index: index, Expr: expr}
	if m := posRe.FindStringSubmatchIndex(msg); m != nil && strings.Contains(msg, "invalid syntax") {
		line, _ := strconv.Atoi(msg[m[2]:m[3]])
		col, _ := strconv.Atoi(msg[m[4]:m[5]])
		if len(rw.edits) > 0 {
			// OTTL saw the rewritten text; the user wants their own positions.
			line, col = lineCol(expr, rw.origOffset(offsetOf(rw.text, line, col)))
			msg = msg[:m[0]] + fmt.Sprintf("%d:%d", line, col) + msg[m[1]:]
		}
		ce.Line, ce.Column = line, col
		if d := rw.dotted; d[1] != "" {
			msg += fmt.Sprintf(`; hint: nested fields are reached with keys: write %s["%s"], not %s.%s`, d[0], d[1], d[0], d[1])
		}
	} else {
		ce.Line, ce.Column = locate(expr, msg)
	}
	ce.Err = &userError{msg: msg, err: err}
	return ce
}

// recordTypeArg is how OTTL spells the context type in argument errors
// ("must be a list of type StringGetter[*github.com/...Record]"): noise to a user.
var recordTypeArg = "[*" + reflect.TypeFor[Record]().PkgPath() + ".Record]"

// userError is OTTL's error with the message cleaned for users, still unwrapping
// to the original.
type userError struct {
	msg string
	err error
}

func (e *userError) Error() string { return e.msg }
func (e *userError) Unwrap() error { return e.err }

// Condition is a compiled trigger or context filter.
type Condition struct {
	cond  *ottl.Condition[*Record]
	text  string
	reads reads
}

// CompileCondition compiles an OTTL condition over the event context. An empty
// expression matches every record, as an empty trigger must (docs/contract.md#section-6).
func CompileCondition(expr string, set component.TelemetrySettings) (*Condition, error) {
	if strings.TrimSpace(expr) == "" {
		return &Condition{}, nil
	}
	rd := reads{fields: map[string]bool{}}
	p, err := newParser(set, &rd)
	if err != nil {
		return nil, err
	}
	rw := rewriteNames(expr)
	c, err := p.ParseCondition(rw.text)
	if err != nil {
		return nil, compileError(KindCondition, -1, expr, rw, err)
	}
	return &Condition{cond: c, text: expr, reads: rd}, nil
}

// String returns the expression as written.
func (c *Condition) String() string { return c.text }

// Reads returns the top-level fields the condition reads, for DecodeRecordFields; ok is
// false when it may read the whole record (then decode it all).
func (c *Condition) Reads() (fields map[string]bool, ok bool) {
	if c.reads.all || c.reads.fields == nil {
		return nil, c.cond == nil // an empty condition reads nothing
	}
	return c.reads.fields, true
}

// Match reports whether r satisfies the condition. An error (a converter failing on
// this record's data, say ParseJSON on a body that is not JSON) comes with false: the
// caller counts the record as not matching and reports the error, and goes on with
// the next record. This is OTTL's "propagate" mode for one condition, leaving the
// decision to continue to the caller rather than to a logger.
func (c *Condition) Match(ctx context.Context, r *Record) (bool, error) {
	if c.cond == nil {
		return true, nil
	}
	ok, err := c.cond.Eval(ctx, r)
	if err != nil {
		return false, err
	}
	return ok, nil
}

// Statements are compiled transforms, applied in order.
type Statements struct {
	stmts []*ottl.Statement[*Record]
	texts []string // as written, for errors
}

// CompileStatements compiles OTTL statements over the event context. Every statement
// is compiled so that the error reports the first failing one by index; an empty
// statement is an error (it is almost certainly a mistake in a list).
func CompileStatements(stmts []string, set component.TelemetrySettings) (*Statements, error) {
	out := &Statements{stmts: make([]*ottl.Statement[*Record], 0, len(stmts))}
	if len(stmts) == 0 {
		return out, nil
	}
	p, err := newParser(set, &reads{fields: map[string]bool{}})
	if err != nil {
		return nil, err
	}
	for i, s := range stmts {
		if strings.TrimSpace(s) == "" {
			return nil, &CompileError{Kind: KindStatement, Index: i, Expr: s, Err: errors.New("statement is empty")}
		}
		rw := rewriteNames(s)
		st, err := p.ParseStatement(rw.text)
		if err != nil {
			return nil, compileError(KindStatement, i, s, rw, err)
		}
		out.stmts = append(out.stmts, st)
		out.texts = append(out.texts, s)
	}
	return out, nil
}

// Len returns the number of statements.
func (s *Statements) Len() int { return len(s.stmts) }

// Apply runs the statements on r in order. A statement that fails on this record is
// skipped and the following ones still run (OTTL's "ignore" error mode, the one the
// collector's transform processor recommends): one odd record must neither stop the
// pipeline nor lose the other transforms. The failures come back joined as
// *EvalError values, for the caller to count and log; r is still usable and
// r.Changed() says whether to re-encode it.
//
// The exception is a statement that makes the record larger than its limit
// (r.SetMaxBytes): Apply stops there, at the first statement that passes it, and the
// error is a *TooLargeError (errors.Is ErrRecordTooLarge) in an *EvalError naming that
// statement. The record must then not be sent.
func (s *Statements) Apply(ctx context.Context, r *Record) error {
	var errs []error
	for i, st := range s.stmts {
		before := r.writes
		_, _, err := st.Execute(ctx, r)
		if err == nil && r.writes != before {
			err = checkRecord(r)
		}
		if err != nil {
			errs = append(errs, &EvalError{Index: i, Expr: s.texts[i], Err: err})
			if errors.Is(err, ErrRecordTooLarge) {
				break
			}
		}
	}
	return errors.Join(errs...)
}

// ValueExpr is a compiled group key: a path or converter expression.
type ValueExpr struct {
	expr  *ottl.ValueExpression[*Record]
	reads reads
}

// CompileValue compiles an OTTL value expression over the event context. An empty
// expression yields "" for every record: one group.
func CompileValue(expr string, set component.TelemetrySettings) (*ValueExpr, error) {
	if strings.TrimSpace(expr) == "" {
		return &ValueExpr{}, nil
	}
	rd := reads{fields: map[string]bool{}}
	p, err := newParser(set, &rd)
	if err != nil {
		return nil, err
	}
	rw := rewriteNames(expr)
	e, err := p.ParseValueExpression(rw.text)
	if err != nil {
		return nil, compileError(KindValue, -1, expr, rw, err)
	}
	return &ValueExpr{expr: e, reads: rd}, nil
}

// Reads is Condition.Reads for a value expression: the top-level fields it reads, for
// DecodeRecordFields; ok is false when it may read the whole record.
func (v *ValueExpr) Reads() (fields map[string]bool, ok bool) {
	if v.reads.all || v.reads.fields == nil {
		return nil, v.expr == nil // an empty expression reads nothing
	}
	return v.reads.fields, true
}

// String evaluates the expression on r as a group key: "" when the value is absent
// or null, a string as is, any other value as its JSON text (so 200 and "200" share a
// group key, while an object or list keys by its content).
func (v *ValueExpr) String(ctx context.Context, r *Record) (string, error) {
	if v.expr == nil {
		return "", nil
	}
	val, err := v.expr.Eval(ctx, r)
	if err != nil {
		return "", err
	}
	return valueString(val), nil
}

func valueString(val any) string {
	switch x := val.(type) {
	case nil:
		return ""
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return string(records.AppendValue(nil, pcommon.NewValueDouble(x)))
	case []byte:
		return base64.StdEncoding.EncodeToString(x)
	case pcommon.Map:
		return string(records.AppendMap(nil, x))
	case pcommon.Slice:
		return string(records.AppendSlice(nil, x))
	case pcommon.Value:
		if x.Type() == pcommon.ValueTypeStr {
			return x.Str()
		}
		if x.Type() == pcommon.ValueTypeEmpty {
			return ""
		}
		return string(records.AppendValue(nil, x))
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case fmt.Stringer:
		return x.String()
	}
	return fmt.Sprint(val)
}

var (
	// OTTL's syntax errors say "at LINE:COL"; participle's lexer errors "LINE:COL:".
	// Read from the text because OTTL's API has no position for syntax errors (it
	// formats participle's error with %s, dropping it from the chain);
	// TestOTTLSyntaxErrorFormat fails when an upgrade changes the text.
	posRe = regexp.MustCompile(`\b(\d+):(\d+)\b`)
	// Names in OTTL's and our messages: undefined function "Foo", path "log.body".
	quotedRe = regexp.MustCompile(`"([A-Za-z_][A-Za-z0-9_.]*)`)
	callRe   = regexp.MustCompile(`call to "([A-Za-z_][A-Za-z0-9_]*)"`)
)

// locate finds the position of a problem OTTL gives no position for: the innermost
// function call the message names, else the first name quoted in the message that
// occurs in expr as a name (outside string literals).
func locate(expr, msg string) (line, col int) {
	// In nested calls the innermost function is the one at fault.
	calls := callRe.FindAllStringSubmatch(msg, -1)
	for i := len(calls) - 1; i >= 0; i-- {
		if off := findName(expr, calls[i][1]); off >= 0 {
			return lineCol(expr, off)
		}
	}
	for _, m := range quotedRe.FindAllStringSubmatch(msg, -1) {
		name := m[1]
		if i := strings.IndexByte(name, '.'); i > 0 && strings.HasPrefix(name, "event.") {
			name = name[:i]
		}
		if off := findName(expr, name); off >= 0 {
			return lineCol(expr, off)
		}
	}
	return 0, 0
}

// findName returns the offset of name in expr as a whole identifier outside string
// literals, or -1.
func findName(expr, name string) int {
	inStr := false
	for i := 0; i < len(expr); i++ {
		c := expr[i]
		if inStr {
			if c == '\\' {
				i++
			} else if c == '"' {
				inStr = false
			}
			continue
		}
		if c == '"' {
			inStr = true
			continue
		}
		if strings.HasPrefix(expr[i:], name) && (i == 0 || !isIdent(expr[i-1])) &&
			(i+len(name) == len(expr) || !isIdent(expr[i+len(name)])) {
			return i
		}
	}
	return -1
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// offsetOf is the byte offset of a 1-based line and rune column, as OTTL's parser
// counts them.
func offsetOf(text string, line, col int) int {
	l, c := 1, 1
	for i, r := range text {
		if l == line && c == col {
			return i
		}
		if r == '\n' {
			l++
			c = 1
		} else {
			c++
		}
	}
	return len(text)
}

func lineCol(expr string, off int) (int, int) {
	line, col := 1, 1
	for _, c := range expr[:off] {
		if c == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}
