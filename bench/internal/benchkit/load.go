package benchkit

import (
	"os"
	"strings"
)

// LoadAvg is the machine's 1, 5 and 15 minute load averages from /proc/loadavg, for a
// report to say how busy the machine was when the run started.
func LoadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
