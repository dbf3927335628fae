package kwokcluster

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"

	"strata.dev/strata/test/integration/framework"
)

// RunForAnnotation on a Job's pod template keeps its pods Running for the
// given duration (for example "20s") before kwok completes them; without
// it they complete at once, as with kwokctl's defaults.
const RunForAnnotation = "pod-complete.stage.kwok.x-k8s.io/delay"

// stageFiles are the stages kwokctl uses by default for the binary runtime
// (fast node and pod stages, heartbeat with lease), read from the kwok
// module the binaries were built from.
var stageFiles = []string{
	"kustomize/stage/node/fast/node-initialize.yaml",
	"kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
	"kustomize/stage/pod/fast/pod-ready.yaml",
	"kustomize/stage/pod/fast/pod-complete.yaml",
	"kustomize/stage/pod/fast/pod-delete.yaml",
}

// writeStages writes a kwokctl configuration file with the suite's stages
// (Stages).
func writeStages(path string) error {
	stages, err := Stages()
	if err != nil {
		return err
	}
	return os.WriteFile(path, stages, 0o600)
}

// Stages returns kwok's default stages as YAML documents, changed in two
// ways: the node heartbeat follows kwokctl's default 10 s status update
// frequency (as kwokctl does), and pod-complete waits for
// RunForAnnotation. kwokctl reads them as configuration; a kwok controller
// running in a cluster (the kind e2e) reads them as Stage objects.
func Stages() ([]byte, error) {
	version, err := kwokVersion()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("go", "mod", "download", "-json", "sigs.k8s.io/kwok@"+version)
	cmd.Dir = os.TempDir() // outside any module
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("downloading the kwok module %s for its stages: %w", version, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return nil, fmt.Errorf("go mod download sigs.k8s.io/kwok@%s: no module directory in %q", version, out)
	}
	var docs []string
	for _, f := range stageFiles {
		raw, err := os.ReadFile(filepath.Join(mod.Dir, f))
		if err != nil {
			return nil, err
		}
		var stage map[string]any
		if err := yaml.Unmarshal(raw, &stage); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		spec, _ := stage["spec"].(map[string]any)
		if spec == nil {
			return nil, fmt.Errorf("%s: no spec", f)
		}
		switch filepath.Base(f) {
		case "node-heartbeat-with-lease.yaml":
			delay, _ := spec["delay"].(map[string]any)
			if delay == nil {
				delay = map[string]any{}
				spec["delay"] = delay
			}
			delay["durationMilliseconds"] = max(number(delay["durationMilliseconds"]), 10000)
			delay["jitterDurationMilliseconds"] = max(number(delay["jitterDurationMilliseconds"]), 11000)
		case "pod-complete.yaml":
			spec["delay"] = map[string]any{
				"durationMilliseconds": 0,
				"durationFrom":         map[string]any{"expressionFrom": fmt.Sprintf(".metadata.annotations[%q]", RunForAnnotation)},
			}
		}
		doc, err := yaml.Marshal(stage)
		if err != nil {
			return nil, err
		}
		docs = append(docs, string(doc))
	}
	return []byte(strings.Join(docs, "---\n")), nil
}

func number(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	}
	return 0
}

// kwokVersion is the kwok version hack/k8s-binaries.sh builds.
func kwokVersion() (string, error) {
	script, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "hack", "k8s-binaries.sh"))
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`KWOK_VERSION=\$\{KWOK_VERSION:-(v[0-9.]+)\}`).FindSubmatch(script)
	if m == nil {
		return "", fmt.Errorf("no KWOK_VERSION in hack/k8s-binaries.sh")
	}
	if v := os.Getenv("KWOK_VERSION"); v != "" {
		return v, nil
	}
	return string(m[1]), nil
}
