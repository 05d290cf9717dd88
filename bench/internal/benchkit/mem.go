package benchkit

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Mem is a reading of a process's resident memory, in MiB: the total (VmRSS), and its
// anonymous (heap, stacks) and file-backed (mostly the executable's own pages) parts.
type Mem struct {
	RSS  float64 `json:"rss_mib"`
	Anon float64 `json:"anon_mib"`
	File float64 `json:"file_mib"`
}

// ReadMem reads a process's resident memory from /proc/<pid>/status.
func ReadMem(pid int) (Mem, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return Mem{}, err
	}
	var m Mem
	fields := map[string]*float64{"VmRSS:": &m.RSS, "RssAnon:": &m.Anon, "RssFile:": &m.File}
	found := 0
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line) // e.g. "VmRSS:", "88792", "kB"
		if len(f) == 3 && fields[f[0]] != nil {
			kb, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return Mem{}, fmt.Errorf("parse %q: %w", line, err)
			}
			*fields[f[0]] = kb / 1024
			found++
		}
	}
	if found != len(fields) {
		return Mem{}, fmt.Errorf("no VmRSS, RssAnon and RssFile in /proc/%d/status", pid)
	}
	return m, nil
}
