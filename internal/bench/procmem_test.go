package bench

import (
	"os"
	"testing"
)

// statusSample is the start of a real /proc/<pid>/status, memory lines
// included.
const statusSample = "Name:\tbroker\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\nPid:\t4242\n" +
	"VmPeak:\t 1324440 kB\nVmSize:\t 1258904 kB\nVmLck:\t       0 kB\nVmPin:\t       0 kB\n" +
	"VmHWM:\t   61296 kB\nVmRSS:\t   48128 kB\nRssAnon:\t   35584 kB\nRssFile:\t   12544 kB\nRssShmem:\t       0 kB\n" +
	"VmData:\t  120780 kB\nThreads:\t9\n"

func TestParseProcStatus(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       Memory
		bad        bool
	}{
		{name: "full", text: statusSample,
			want: Memory{RSS: 48128 << 10, HWM: 61296 << 10, RSSAnon: 35584 << 10, RSSFile: 12544 << 10}},
		{name: "old kernel without Rss lines", text: "Name:\tx\nVmHWM:\t 2 kB\nVmRSS:\t1 kB\n",
			want: Memory{RSS: 1 << 10, HWM: 2 << 10}},
		{name: "kernel thread", text: "Name:\tkthreadd\nState:\tS (sleeping)\nThreads:\t1\n", bad: true},
		{name: "no unit", text: "VmHWM:\t2\nVmRSS:\t1 kB\n", bad: true},
		{name: "other unit", text: "VmHWM:\t2 kB\nVmRSS:\t1 MB\n", bad: true},
		{name: "not a number", text: "VmHWM:\tx kB\nVmRSS:\t1 kB\n", bad: true},
		{name: "negative", text: "VmHWM:\t-2 kB\nVmRSS:\t1 kB\n", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProcStatus([]byte(tc.text))
			if tc.bad {
				if err == nil {
					t.Fatalf("parsed %q as %+v, want an error", tc.text, got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("parseProcStatus = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestProcessMemory(t *testing.T) {
	onLinux(t)
	m, err := ProcessMemory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if m.RSS <= 0 || m.HWM < m.RSS || m.RSSAnon <= 0 || m.RSSFile <= 0 || m.RSSAnon+m.RSSFile > m.RSS {
		t.Errorf("this process's memory %+v: want RSS > 0, HWM ≥ RSS, anon + file ≤ RSS", m)
	}
	if _, err := ProcessMemory(-1); err == nil {
		t.Error("memory of pid -1: no error")
	}
}
