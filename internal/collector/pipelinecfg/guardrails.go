package pipelinecfg

import (
	"fmt"
	"time"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

// Bounds of the guardrail settings. They refuse values that can only be mistakes (a
// cooldown longer than a day hides an incident's recurrence; a window the size of a
// large file fits no model) while leaving every sensible choice open.
const (
	MaxCooldownSeconds   = 24 * 3600
	MaxCallsPerMinuteCap = 10_000
	MaxCallsPerDayCap    = 1_000_000
	// MinWindowMaxBytes leaves room for the marker that replaces an oversized record
	// (a 1 KiB preview, escaped).
	MinWindowMaxBytes = 8 * 1024
	MaxWindowMaxBytes = 10_000_000
	// MaxWindowMaxEvents is also what the window store keeps per group at most.
	MaxWindowMaxEvents = 50_000
)

// guardrails checks the guardrail fields' ranges and fills c with them, defaults
// applied.
func (c *Compiled) guardrails(p mirror.Pipeline) error {
	if err := inRange("cooldown_seconds", p.CooldownSeconds, 0, MaxCooldownSeconds, "0 turns the cooldown off"); err != nil {
		return err
	}
	if err := inRange("max_calls_per_minute", p.MaxCallsPerMinute, 0, MaxCallsPerMinuteCap, "0 is no limit"); err != nil {
		return err
	}
	if err := inRange("max_calls_per_day", p.MaxCallsPerDay, 0, MaxCallsPerDayCap, "0 is no limit"); err != nil {
		return err
	}
	if p.WindowMaxBytes != 0 {
		if err := inRange("window_max_bytes", p.WindowMaxBytes, MinWindowMaxBytes, MaxWindowMaxBytes,
			fmt.Sprintf("0 is the default, %d", mirror.DefaultWindowMaxBytes)); err != nil {
			return err
		}
	}
	if err := inRange("window_max_events", p.WindowMaxEvents, 0, MaxWindowMaxEvents,
		fmt.Sprintf("0 is the default, %d", mirror.DefaultWindowMaxEvents)); err != nil {
		return err
	}
	c.Cooldown = time.Duration(p.CooldownSeconds) * time.Second
	c.MaxCallsPerMinute, c.MaxCallsPerDay = p.MaxCallsPerMinute, p.MaxCallsPerDay
	c.WindowMaxBytes, c.WindowMaxEvents = p.WindowMaxBytes, p.WindowMaxEvents
	if c.WindowMaxBytes == 0 {
		c.WindowMaxBytes = mirror.DefaultWindowMaxBytes
	}
	if c.WindowMaxEvents == 0 {
		c.WindowMaxEvents = mirror.DefaultWindowMaxEvents
	}
	return nil
}

func inRange(field string, v, lo, hi int, zero string) error {
	if v < lo || v > hi {
		return &FieldError{field, fmt.Errorf("must be between %d and %d (%s), got %d", lo, hi, zero, v)}
	}
	return nil
}
