package triggerprocessor

// Config of the trigger processor. Everything it does is per project, from the
// configuration mirror (trigger and transforms, contract section 6); nothing is set here.
type Config struct{}

// Validate implements component.ConfigValidator.
func (c *Config) Validate() error { return nil }
