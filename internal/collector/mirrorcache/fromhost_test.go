package mirrorcache

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.uber.org/zap"
)

type host map[component.ID]component.Component

func (h host) GetExtensions() map[component.ID]component.Component { return h }

type owner struct {
	component.StartFunc
	component.ShutdownFunc
	c *Cache
}

func (o owner) MirrorCache() *Cache { return o.c }

type notOwner struct {
	component.StartFunc
	component.ShutdownFunc
}

// Components read the cache of the extension their `mirror` setting names, never the
// first one that happens to hold a cache.
func TestFromHostTakesTheNamedExtension(t *testing.T) {
	a, b := NewCache(zap.NewNop()), NewCache(zap.NewNop())
	second := component.MustNewIDWithName("projectauth", "second")
	h := host{DefaultExtension: owner{c: a}, second: owner{c: b},
		component.MustNewID("health_check"): notOwner{}}

	got, err := FromHost(h, second)
	require.NoError(t, err)
	assert.Same(t, b, got)
	got, err = FromHost(h, DefaultExtension)
	require.NoError(t, err)
	assert.Same(t, a, got)

	_, err = FromHost(h, component.MustNewIDWithName("projectauth", "missing"))
	assert.ErrorContains(t, err, "no projectauth/missing extension is running")
	_, err = FromHost(h, component.MustNewID("health_check"))
	assert.ErrorContains(t, err, "holds no configuration mirror")
	assert.Error(t, CheckExtension(component.ID{}))
	assert.NoError(t, CheckExtension(DefaultExtension))
}
