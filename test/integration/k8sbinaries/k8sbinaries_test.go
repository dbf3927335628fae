// Package k8sbinaries checks that hack/k8s-binaries.sh is safe to run twice
// at once on one cache directory: two runs build etcd (the cheapest
// component) into an empty cache together, and both must succeed, link a
// working binary and leave nothing of their builds behind. The first run
// names etcd twice, so that two of its own parallel builds (it builds
// components side by side) race on the same entry and symlink as well.
//
// It builds etcd from source through the Go module proxy, so it runs with
// the integration tests (make test-integration), not the unit tests.
package k8sbinaries

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// etcdVersion reads the etcd version the script builds by default.
func etcdVersion(t *testing.T, script string) string {
	t.Helper()
	src, err := os.ReadFile(script)
	if err != nil {
		t.Fatalf("reading the script: %v", err)
	}
	m := regexp.MustCompile(`(?m)^ETCD_VERSION=\$\{ETCD_VERSION:-(v[0-9.]+)\}$`).FindSubmatch(src)
	if m == nil {
		t.Fatalf("found no default ETCD_VERSION in %s", script)
	}
	return string(m[1])
}

// run is one run of the script.
type run struct {
	binDir string
	cmd    *exec.Cmd
	out    bytes.Buffer
	err    error
}

func TestConcurrentRunsShareTheCache(t *testing.T) {
	for _, tool := range []string{"bash", "go", "flock"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not on PATH", tool)
		}
	}
	// go test runs in the package's directory.
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "hack", "k8s-binaries.sh")
	version := etcdVersion(t, script)
	cache := t.TempDir()

	runs := []*run{{binDir: t.TempDir()}, {binDir: t.TempDir()}}
	for i, r := range runs {
		args := []string{script, "etcd"}
		if i == 0 {
			args = append(args, "etcd")
		}
		r.cmd = exec.Command("bash", args...)
		r.cmd.Dir = root
		r.cmd.Env = append(os.Environ(),
			"STRATA_CACHE_DIR="+cache,
			"STRATA_K8S_BIN_DIR="+r.binDir,
			"ETCD_VERSION="+version,
			"STRATA_BUILD_JOBS=2",
		)
		r.cmd.Stdout = &r.out
		r.cmd.Stderr = &r.out
		if err := r.cmd.Start(); err != nil {
			t.Fatalf("starting run %d: %v", i, err)
		}
	}
	for _, r := range runs {
		r.err = r.cmd.Wait()
	}
	for i, r := range runs {
		if r.err != nil {
			t.Errorf("run %d: %v; its output:\n%s", i, r.err, r.out.String())
		} else {
			t.Logf("run %d's output:\n%s", i, r.out.String())
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	outputs := func() string {
		return "run 0's output:\n" + runs[0].out.String() + "\nrun 1's output:\n" + runs[1].out.String()
	}

	entry := filepath.Join(cache, "etcd-"+version)
	cached := filepath.Join(entry, "etcd")
	if fi, err := os.Stat(cached); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("no executable %s (stat: %v)\n%s", cached, err, outputs())
	}
	for i, r := range runs {
		link := filepath.Join(r.binDir, "etcd")
		fi, err := os.Stat(link)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
			t.Fatalf("run %d: %s is not an executable (stat: %v)\n%s", i, link, err, outputs())
		}
		if target, err := os.Readlink(link); err != nil || target != cached {
			t.Fatalf("run %d: %s links to %q (%v), want %s\n%s", i, link, target, err, cached, outputs())
		}
	}

	// Nothing but the entry, the lock files and an empty build directory.
	top, err := os.ReadDir(cache)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range top {
		switch e.Name() {
		case filepath.Base(entry), ".locks":
		case ".build":
			left, err := os.ReadDir(filepath.Join(cache, ".build"))
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range left {
				t.Errorf("build leftover %s", filepath.Join(cache, ".build", l.Name()))
			}
		default:
			t.Errorf("unexpected %s in the cache", filepath.Join(cache, e.Name()))
		}
	}
	if t.Failed() {
		t.Fatalf("the cache holds more than it should\n%s", outputs())
	}
}
