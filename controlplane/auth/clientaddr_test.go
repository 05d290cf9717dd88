package auth

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClientAddr(t *testing.T) {
	trusted, err := ParseTrustedProxies("10.0.0.0/8, 192.0.2.7 2001:db8::/32")
	require.NoError(t, err)
	for _, c := range []struct {
		name, peer string
		xff        []string
		want       string
	}{
		{"no proxy", "198.51.100.1:5000", nil, "198.51.100.1"},
		{"an untrusted peer's header is ignored", "198.51.100.1:5000", []string{"203.0.113.9"}, "198.51.100.1"},
		{"a trusted proxy names the client", "10.1.2.3:5000", []string{"203.0.113.9"}, "203.0.113.9"},
		{"what the client wrote left of it is not believed", "10.1.2.3:5000", []string{"1.1.1.1, 203.0.113.9"}, "203.0.113.9"},
		{"trusted hops are skipped", "10.1.2.3:5000", []string{"203.0.113.9, 192.0.2.7", "10.9.9.9"}, "203.0.113.9"},
		{"a forged trusted hop stops nothing: the first untrusted from the right wins", "10.1.2.3:5000", []string{"10.5.5.5, 203.0.113.9"}, "203.0.113.9"},
		{"all trusted: the leftmost", "10.1.2.3:5000", []string{"10.5.5.5, 10.6.6.6"}, "10.5.5.5"},
		{"entries with ports", "[2001:db8::1]:443", []string{"[2001:db8:1::5]:1000, 203.0.113.9:4711"}, "203.0.113.9"},
		{"garbage stops the walk at the last known hop", "10.1.2.3:5000", []string{"203.0.113.9, unknown"}, "10.1.2.3"},
		{"a trusted proxy without the header", "10.1.2.3:5000", nil, "10.1.2.3"},
	} {
		r, _ := http.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.peer
		for _, v := range c.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		assert.Equal(t, c.want, ClientAddr(r, trusted), c.name)
	}
	_, err = ParseTrustedProxies("10.0.0.0/8,proxy.example.com")
	assert.ErrorContains(t, err, `"proxy.example.com"`)
	none, err := ParseTrustedProxies("")
	require.NoError(t, err)
	assert.Empty(t, none)
}
