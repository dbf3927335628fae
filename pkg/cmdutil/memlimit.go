package cmdutil

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// cgroupMemoryFiles are where a container's memory limit is read: cgroup
// v2, then v1.
var cgroupMemoryFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// memoryLimitShare is the part of the container's memory limit the Go
// runtime keeps the heap under: the rest is for what the runtime does not
// count (stacks, the binary, buffers of the kernel charged to the pod).
const memoryLimitShare = 0.9

// SoftMemoryLimit gives the Go runtime a soft memory limit of 90% of the
// container's memory limit (resources.limits.memory), unless GOMEMLIMIT
// is set: without one, the garbage collector lets the heap grow to twice
// what is live (GOGC) whatever the limit, and a hub with a large backlog
// is killed for memory it did not need. It returns the limit set, 0 when
// none was (no limit, or GOMEMLIMIT set).
func SoftMemoryLimit() (int64, error) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0, nil
	}
	limit, err := containerMemoryLimit(cgroupMemoryFiles)
	if err != nil || limit == 0 {
		return 0, err
	}
	soft := int64(float64(limit) * memoryLimitShare)
	debug.SetMemoryLimit(soft)
	return soft, nil
}

// containerMemoryLimit reads the first of files that exists: its limit in
// bytes, 0 for none ("max", or v1's huge number for none).
func containerMemoryLimit(files []string) (int64, error) {
	for _, f := range files {
		data, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, err
		}
		return parseMemoryLimit(string(data))
	}
	return 0, nil
}

// parseMemoryLimit parses a cgroup memory limit file's content.
func parseMemoryLimit(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "max" || s == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("reading the container's memory limit: %w", err)
	}
	// cgroup v1 says "no limit" with a page-rounded MaxInt64.
	if n >= math.MaxInt64/2 {
		return 0, nil
	}
	return int64(n), nil
}
