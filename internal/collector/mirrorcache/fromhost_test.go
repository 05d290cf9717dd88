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
	second := component.MustNewIDWithName("configmirror", "second")
	h := host{DefaultExtension: owner{c: a}, second: owner{c: b},
		component.MustNewID("health_check"): notOwner{}}

	got, err := FromHost(h, second)
	require.NoError(t, err)
	assert.Same(t, b, got)
	got, err = FromHost(h, DefaultExtension)
	require.NoError(t, err)
	assert.Same(t, a, got)

	_, err = FromHost(h, component.MustNewIDWithName("configmirror", "missing"))
	assert.ErrorContains(t, err, "no configmirror/missing extension is running")
	_, err = FromHost(h, component.MustNewID("health_check"))
	assert.ErrorContains(t, err, "holds no configuration mirror")
	assert.Error(t, CheckExtension(component.ID{}))
	assert.NoError(t, CheckExtension(DefaultExtension))
}

// The projectauth extension held the mirror before configmirror did, and still lends its
// cache to the ingest receiver: a config that names it in `mirror` is refused, at
// validation and at start, with the new form, rather than silently served.
func TestProjectauthIsRefusedWithTheNewForm(t *testing.T) {
	const want = "projectauth no longer holds the configuration mirror: add the configmirror extension and set mirror: configmirror"
	legacy := component.MustNewID("projectauth")
	assert.EqualError(t, CheckExtension(legacy), want)
	assert.EqualError(t, CheckExtension(component.MustNewIDWithName("projectauth", "tenants")), want)
	h := host{legacy: owner{c: NewCache(zap.NewNop())}}
	_, err := FromHost(h, legacy)
	assert.EqualError(t, err, want)
	// An old config relying on the default, with projectauth but no configmirror running.
	_, err = FromHost(h, DefaultExtension)
	assert.ErrorIs(t, err, ErrLegacyMirror)
	assert.ErrorContains(t, err, "no configmirror extension is running")
}
