package ottlevent

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
)

// TestOTTLSyntaxErrorFormat pins the text of OTTL's syntax errors that compileError
// reads positions from (posRe and "invalid syntax"). OTTL offers no position in its
// API for these: formatParseError formats participle's UnexpectedTokenError with %s, so
// it is not in the error chain. When an OTTL upgrade changes the text, this fails first
// and says where to look; if the upgrade wraps the participle error, read its Position()
// instead of the text.
func TestOTTLSyntaxErrorFormat(t *testing.T) {
	p, err := newParser(componenttest.NewNopTelemetrySettings(), &reads{fields: map[string]bool{}})
	require.NoError(t, err)
	for expr, want := range map[string]struct {
		line, col int
	}{
		`severity_number >= and status == "x"`:   {1, 20},
		"status == \"x\"\n  or name == \"y\" or": {2, 20},
	} {
		_, err := p.ParseCondition(expr)
		require.Error(t, err, expr)
		msg := err.Error()
		require.Contains(t, msg, "invalid syntax", "OTTL's syntax errors no longer say %q: update compileError (compile.go)", "invalid syntax")
		m := posRe.FindStringSubmatch(msg)
		require.NotNil(t, m, "OTTL's syntax error no longer carries LINE:COL: update posRe and compileError (compile.go): %s", msg)
		assert.Equal(t, []string{m[0], strconv.Itoa(want.line), strconv.Itoa(want.col)}, m, "OTTL's position for %q moved: %s", expr, msg)
	}
}
