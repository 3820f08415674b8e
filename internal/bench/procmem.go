package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// Memory is a process's memory as /proc/<pid>/status reports it, in
// bytes.
type Memory struct {
	// RSS (VmRSS) is the resident set: the pages of the process in RAM
	// now, RSSAnon plus RSSFile plus shared memory.
	RSS int64
	// HWM (VmHWM) is the largest RSS the process has had since it
	// started.
	HWM int64
	// RSSAnon (RssAnon) is the resident anonymous memory: the Go heap,
	// goroutine stacks, the runtime's own.
	RSSAnon int64
	// RSSFile (RssFile) is the resident file-backed memory: the
	// executable's pages and any mapped file.
	RSSFile int64
}

// ProcessMemory returns process pid's memory from /proc/<pid>/status.
// Where /proc cannot tell the error wraps ErrNoProc.
func ProcessMemory(pid int) (Memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, fmt.Errorf("%w: memory of pid %d: %v", ErrNoProc, pid, err)
	}
	return parseProcStatus(b)
}

// parseProcStatus reads the memory lines of the text of
// /proc/<pid>/status, each a name, a colon, spaces or tabs, a number and
// the unit kB (KiB):
//
//	VmHWM:	   11296 kB
//	VmRSS:	   11296 kB
//	RssAnon:	    3584 kB
//	RssFile:	    7712 kB
//
// VmRSS and VmHWM must be there; RssAnon and RssFile (Linux 4.5 and
// later) are 0 when they are not.
func parseProcStatus(b []byte) (Memory, error) {
	var m Memory
	fields := map[string]*int64{"VmRSS": &m.RSS, "VmHWM": &m.HWM, "RssAnon": &m.RSSAnon, "RssFile": &m.RSSFile}
	seen := 0
	for line := range bytes.Lines(b) {
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		dst := fields[string(name)]
		if dst == nil {
			continue
		}
		f := bytes.Fields(value)
		if len(f) != 2 || string(f[1]) != "kB" {
			return Memory{}, fmt.Errorf("bench: /proc status line %q is not a count of kB", bytes.TrimSpace(line))
		}
		n, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil || n < 0 {
			return Memory{}, fmt.Errorf("bench: /proc status line %q is not a count of kB", bytes.TrimSpace(line))
		}
		*dst = n << 10
		if string(name) == "VmRSS" || string(name) == "VmHWM" {
			seen++
		}
	}
	if seen != 2 {
		return Memory{}, fmt.Errorf("bench: /proc status lacks VmRSS or VmHWM (a kernel thread?)")
	}
	return m, nil
}
