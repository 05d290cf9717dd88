package containers

import (
	"encoding/json"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The images are small, run as a non-root user, say what they are built from, and carry
// the shipped configs, which the collector in the image accepts.
func TestImagesAreSmallNonRootAndLabelled(t *testing.T) {
	images(t)
	for _, image := range []string{collectorImage, controlplaneImage} {
		var inspect []struct {
			Size   int64
			Config struct {
				User   string
				Labels map[string]string
				Env    []string
			}
		}
		require.NoError(t, json.Unmarshal([]byte(docker(t, "image", "inspect", image)), &inspect))
		require.Len(t, inspect, 1)
		img := inspect[0]
		t.Logf("%s: %.1f MB", image, float64(img.Size)/(1<<20))
		assert.Less(t, img.Size, int64(maxImageBytes), "%s is %d bytes", image, img.Size)
		assert.Equal(t, "10001:10001", img.Config.User, "%s runs as the non-root user", image)
		for _, l := range []string{"version", "revision", "source", "title", "created"} {
			assert.NotEmpty(t, img.Config.Labels["org.opencontainers.image."+l], "%s label %s", image, l)
		}
		assert.Contains(t, img.Config.Env, "SVC_DATA_DIR=/data")
	}

	// Each shipped config is in the image, and the collector there accepts it (static
	// binary, no shell, nothing else in the image).
	for _, config := range []string{"embedded", "receiver", "pipeline", "sink"} {
		out, err := exec.Command("docker", "run", "--rm", "--network", "host", "-e", "NATS_URL=nats://127.0.0.1:1",
			collectorImage, "validate", "--config", "/etc/otelcol-svc/"+config+".yaml").CombinedOutput()
		assert.NoError(t, err, "validate %s in the image: %s", config, out)
	}
}
