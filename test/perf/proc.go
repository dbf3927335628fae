package perf

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat (USER_HZ,
// 100 on Linux).
const userHZ = 100

// procStat is what the benchmarks read of a process from /proc.
type procStat struct {
	comm string
	ppid int
	// cpu is the user and system CPU time used so far, in seconds.
	cpu float64
}

// readProcStat reads /proc/<pid>/stat.
func readProcStat(pid int) (procStat, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(string(data))
}

// parseProcStat parses a /proc/<pid>/stat line: "pid (comm) state ppid
// ... utime stime ...", where comm may hold spaces and parentheses.
func parseProcStat(line string) (procStat, error) {
	open, end := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
	if open < 0 || end < open {
		return procStat{}, fmt.Errorf("malformed stat line %q", line)
	}
	// After comm: state ppid pgrp session tty_nr tpgid flags minflt
	// cminflt majflt cmajflt utime stime.
	rest := strings.Fields(line[end+1:])
	if len(rest) < 13 {
		return procStat{}, fmt.Errorf("short stat line %q", line)
	}
	ppid, err := strconv.Atoi(rest[1])
	if err != nil {
		return procStat{}, fmt.Errorf("ppid in %q: %w", line, err)
	}
	var ticks int64
	for _, f := range rest[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return procStat{}, fmt.Errorf("CPU time in %q: %w", line, err)
		}
		ticks += n
	}
	return procStat{comm: line[open+1 : end], ppid: ppid, cpu: float64(ticks) / userHZ}, nil
}

// cpuGroups names the processes whose CPU time a benchmark counts: this
// process ("test process": the controllers it runs in-process and the
// harness) and its children, the kube-apiservers and etcds envtest
// started, by command and cluster ("kube-apiserver hub", "etcd w1").
type cpuGroups map[int]string

// findCPUGroups finds this process's children and tells which cluster
// each serves: a kube-apiserver by its --secure-port (the port of the
// cluster's URL), an etcd by its client URL, which that cluster's
// kube-apiserver names in --etcd-servers. clusters maps each cluster's
// API server URL to its name.
func findCPUGroups(clusters map[string]string) (cpuGroups, error) {
	self := os.Getpid()
	ports := map[string]string{}
	for host, name := range clusters {
		u, err := url.Parse(host)
		if err != nil {
			return nil, err
		}
		ports[u.Port()] = name
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	groups := cpuGroups{self: "test process"}
	etcdOf := map[int]string{}         // etcd pid -> its client URL
	etcdCluster := map[string]string{} // etcd client URL -> cluster
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readProcStat(pid)
		if err != nil || st.ppid != self {
			continue // gone, or not ours
		}
		args, err := cmdline(pid)
		if err != nil {
			continue
		}
		switch st.comm {
		case "kube-apiserver":
			cluster := ports[flagValue(args, "secure-port")]
			if cluster == "" {
				cluster = "unknown"
			}
			groups[pid] = "kube-apiserver " + cluster
			for s := range strings.SplitSeq(flagValue(args, "etcd-servers"), ",") {
				etcdCluster[s] = cluster
			}
		case "etcd":
			etcdOf[pid] = flagValue(args, "listen-client-urls")
		default:
			groups[pid] = st.comm
		}
	}
	for pid, urls := range etcdOf {
		cluster := "unknown"
		for s := range strings.SplitSeq(urls, ",") {
			if c, ok := etcdCluster[s]; ok {
				cluster = c
			}
		}
		groups[pid] = "etcd " + cluster
	}
	if len(groups) == 1 {
		return nil, errors.New("no child processes found: are the API servers running?")
	}
	return groups, nil
}

// cmdline is the command line of a process.
func cmdline(pid int) ([]string, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimRight(string(data), "\x00"), "\x00"), nil
}

// flagValue is the value of --name in args, as --name=value or
// --name value; "" when absent.
func flagValue(args []string, name string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
		if a == "--"+name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// sample reads the CPU seconds used so far by each group. A process
// that is gone counts nothing.
func (g cpuGroups) sample() map[string]float64 {
	out := map[string]float64{}
	for pid, name := range g {
		if st, err := readProcStat(pid); err == nil {
			out[name] += st.cpu
		}
	}
	return out
}
