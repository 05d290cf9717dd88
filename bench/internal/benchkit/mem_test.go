package benchkit

import (
	"os"
	"testing"
)

func TestReadMemSplitsRSS(t *testing.T) {
	m, err := ReadMem(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// VmRSS is RssAnon + RssFile + RssShmem; this process has no shared memory to speak of.
	if m.RSS <= 0 || m.Anon <= 0 || m.File <= 0 || m.Anon+m.File > m.RSS+0.01 || m.Anon+m.File < m.RSS-1 {
		t.Errorf("ReadMem = %+v", m)
	}
	if _, err := ReadMem(1 << 30); err == nil {
		t.Error("no error for a process that does not exist")
	}
}
