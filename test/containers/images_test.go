package containers

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
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
			Size     int64
			RepoTags []string
			Config   struct {
				User       string
				Labels     map[string]string
				Env        []string
				WorkingDir string
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
		// The build is the tree's git describe, in the tag and the label.
		assert.Equal(t, imageVersion, img.Config.Labels["org.opencontainers.image.version"], "%s version label", image)
		assert.Contains(t, img.RepoTags, image)
	}

	// The control plane says its build (the collector's --version is builder-config.yaml's
	// dist.version, which ocb writes into generated code that does not change per commit).
	out, err := exec.Command("docker", "run", "--rm", controlplaneImage, "--version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "controlplane "+imageVersion, strings.TrimSpace(string(out)))

	// A writable /tmp (os.TempDir, SQLite's temporary files) and /data as the working
	// directory, in every image: scratch has neither.
	for _, image := range []string{collectorImage, controlplaneImage, natsImage} {
		var inspect []struct{ Config struct{ WorkingDir string } }
		require.NoError(t, json.Unmarshal([]byte(docker(t, "image", "inspect", image)), &inspect))
		assert.Equal(t, "/data", inspect[0].Config.WorkingDir, "%s working directory", image)
		id := docker(t, "create", image)
		tarball, err := exec.Command("docker", "cp", id+":/tmp", "-").Output()
		docker(t, "rm", id)
		require.NoError(t, err, "docker cp %s:/tmp", image)
		hdr, err := tar.NewReader(bytes.NewReader(tarball)).Next()
		require.NoError(t, err, "%s: /tmp", image)
		assert.Equal(t, os.FileMode(0o777)|os.ModeSticky, hdr.FileInfo().Mode().Perm()|hdr.FileInfo().Mode()&os.ModeSticky, "%s: /tmp mode", image)
	}

	// Each shipped config is in the image, and the collector there accepts it (static
	// binary, no shell, nothing else in the image).
	for _, config := range []string{"embedded", "receiver", "pipeline", "sink"} {
		out, err := exec.Command("docker", "run", "--rm", "--network", "host", "-e", "NATS_URL=nats://127.0.0.1:1",
			collectorImage, "validate", "--config", "/etc/otelcol-svc/"+config+".yaml").CombinedOutput()
		assert.NoError(t, err, "validate %s in the image: %s", config, out)
	}
}
