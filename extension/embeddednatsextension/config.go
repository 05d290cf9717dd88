package embeddednatsextension

import (
	"errors"
	"fmt"
	"net"
	"strconv"
)

// Config of the embedded NATS server.
type Config struct {
	// ExternalURL, when non-empty, means an external NATS is in use (NATS_URL is set):
	// the extension then starts nothing. Configs set it to "${env:NATS_URL:-}".
	ExternalURL string `mapstructure:"external_url"`
	// Listen is the client address, reachable by the other processes of the machine.
	Listen string `mapstructure:"listen"`
	// StoreDir is where JetStream keeps streams on disk.
	StoreDir string `mapstructure:"store_dir"`
	// MaxStore caps JetStream's disk use in bytes (0: nats-server's default, a share of the disk).
	MaxStore int64 `mapstructure:"max_store"`
	// MaxMemory caps JetStream's memory-backed storage in bytes (0: nats-server's default).
	MaxMemory int64 `mapstructure:"max_memory"`
	// MaxPayload is the largest message in bytes (0: nats-server's 1 MiB default).
	MaxPayload int32 `mapstructure:"max_payload"`
	// InProcessClients lets the components of this collector connect to the server in
	// memory rather than through its TCP listener (which other processes keep using).
	// Off by default: in bench/ingest it saved no CPU and raised the RSS peaks at 10k
	// records/s (see the README).
	InProcessClients bool `mapstructure:"in_process_clients"`
}

// Validate checks the listen address and the store directory.
func (c *Config) Validate() error {
	if c.ExternalURL != "" {
		return nil
	}
	var errs []error
	host, port, err := net.SplitHostPort(c.Listen)
	if err != nil {
		errs = append(errs, fmt.Errorf("listen %q must be host:port: %w", c.Listen, err))
	} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		errs = append(errs, fmt.Errorf("listen %q: bad port", c.Listen))
	} else if host == "" {
		errs = append(errs, fmt.Errorf("listen %q: give a host, e.g. 127.0.0.1", c.Listen))
	}
	if c.StoreDir == "" {
		errs = append(errs, errors.New("store_dir is required"))
	}
	if c.MaxStore < 0 || c.MaxMemory < 0 || c.MaxPayload < 0 {
		errs = append(errs, errors.New("max_store, max_memory and max_payload must not be negative"))
	}
	return errors.Join(errs...)
}
