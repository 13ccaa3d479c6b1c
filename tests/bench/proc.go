package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of CPU times in /proc (100 on Linux).
const clockTicks = 100

// cpuSample is the CPU time (in clock ticks) used so far by ax and by the
// PostgreSQL cluster; -1 when unknown.
type cpuSample struct {
	at     time.Time
	ax     int64
	pg     int64
	self   int64 // this process: load generator and receiver
	busy   int64 // the whole machine, every CPU
	rssKiB int64
}

func sampleCPU(axPid int, st *stack) cpuSample {
	s := cpuSample{at: time.Now(), ax: -1, pg: -1}
	if f, ok := procStat(axPid); ok {
		s.ax = f.utime + f.stime
	}
	s.rssKiB = procRSS(axPid)
	if f, ok := procStat(os.Getpid()); ok {
		s.self = f.utime + f.stime
	}
	s.busy = machineBusy()
	if pm, ok := postmasterPID(filepath.Join(st.dir, "pg", "data")); ok {
		s.pg = postgresTicks(pm)
	}
	return s
}

type statFields struct {
	ppid                         int
	utime, stime, cutime, cstime int64
}

// procStat reads /proc/pid/stat.
func procStat(pid int) (statFields, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return statFields{}, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return statFields{}, false
	}
	// After "pid (comm)": state is field 3, ppid 4, utime 14, stime 15,
	// cutime 16, cstime 17.
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return statFields{}, false
	}
	n := func(j int) int64 { v, _ := strconv.ParseInt(f[j], 10, 64); return v }
	return statFields{ppid: int(n(1)), utime: n(11), stime: n(12), cutime: n(13), cstime: n(14)}, true
}

// procRSS returns VmRSS in KiB.
func procRSS(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb
		}
	}
	return 0
}

func postmasterPID(dataDir string) (int, bool) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	return pid, err == nil && pid > 0
}

// postgresTicks is the CPU time of the postmaster, its live children, and
// (through the postmaster's cutime/cstime) its children that have exited.
func postgresTicks(pm int) int64 {
	f, ok := procStat(pm)
	if !ok {
		return -1
	}
	total := f.utime + f.stime + f.cutime + f.cstime
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == pm {
			continue
		}
		if c, ok := procStat(pid); ok && c.ppid == pm {
			total += c.utime + c.stime
		}
	}
	return total
}

// machineBusy is the CPU time every CPU spent on anything but idling and
// waiting for I/O, from the first line of /proc/stat (procStatCPU).
func machineBusy() int64 {
	c := procStatCPU()
	if c.total == 0 {
		return -1
	}
	return c.busy + c.steal
}

// loopbackRate measures how many HTTP requests per second one client makes
// to a server on loopback for d, both in this process: the kind of work a
// delivery is made of (system calls, scheduling), on a shared virtual
// machine whose speed varies from hour to hour. 0 if it could not measure.
func loopbackRate(ctx context.Context, d time.Duration) float64 {
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	srv := &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }),
		ReadHeaderTimeout: time.Second,
	}
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Close() }()
	url := "http://" + ln.Addr().String() + "/"
	client := &http.Client{Timeout: time.Second}
	n, start := 0, time.Now()
	for time.Since(start) < d {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader("{}"))
		if err != nil {
			return 0
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		n++
	}
	return float64(n) / time.Since(start).Seconds()
}

// fsyncRate measures how many 8 kB write+fdatasync pairs per second the
// disk under dir sustains for d: what a PostgreSQL commit costs at least.
// It varies over time on shared virtual disks, and durable figures with it.
func fsyncRate(dir string, d time.Duration) float64 {
	f, err := os.CreateTemp(dir, "fsync-probe-")
	if err != nil {
		return 0
	}
	defer func() {
		_ = f.Close()
		_ = os.Remove(f.Name())
	}()
	buf := make([]byte, 8192)
	n, start := 0, time.Now()
	for time.Since(start) < d {
		if _, err := f.WriteAt(buf, 0); err != nil {
			return 0
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return 0
		}
		n++
	}
	return float64(n) / time.Since(start).Seconds()
}
