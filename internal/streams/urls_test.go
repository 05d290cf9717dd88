package streams

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRedactURLsHidesPasswordsAndTokens(t *testing.T) {
	got := RedactURLs("nats://svc:s3cret@n1:4222,nats://tok3n@n2:4222,nats://n3:4222")
	assert.Equal(t, "nats://svc:xxxxx@n1:4222,nats://redacted@n2:4222,nats://n3:4222", got)
	assert.NotContains(t, got, "s3cret")
	assert.NotContains(t, got, "tok3n")
	assert.Equal(t, "", RedactURLs(""))
}
