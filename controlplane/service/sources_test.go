package service

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Templates are checked the way internal/textfmt renders them.
func TestCheckTemplate(t *testing.T) {
	for tpl, ok := range map[string]bool{
		"":                      true,
		"plain text":            true,
		"{repo.name}: {action}": true,
		"{ repo.name }":         true, // spaces around a path are trimmed when rendering
		"{{literal}} and }}":    true,
		"{a}}}":                 true, // {a} then a literal }
		"{items.0.id}":          true,
		"{a":                    false,
		"{a {b}":                false,
		"a } b":                 false,
		"{}":                    false,
		"{ }":                   false,
		"{a..b}":                false,
		"{.a}":                  false,
		"{a\x01}":               false,
		"{{":                    true,
		"}":                     false,
		"{{{a}":                 true, // a literal { then {a}
		"{é.ü}":                 true,
	} {
		err := checkTemplate(tpl)
		assert.Equal(t, ok, err == nil, "%q: %v", tpl, err)
	}
}
