// Command execplugin is an exec credential plugin for the hub's
// integration tests: it answers with the bearer token in the file that the
// cluster's exec configuration names (the ClusterProfile's
// client.authentication.k8s.io/exec extension, passed in
// KUBERNETES_EXEC_INFO when the plugin is configured with
// provideClusterInfo), as cloud providers' plugins answer with a token of
// their own.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// execCredential is the part of client.authentication.k8s.io/v1
// ExecCredential the plugin reads and writes.
type execCredential struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Spec       struct {
		Cluster *struct {
			Server string `json:"server"`
			Config struct {
				TokenFile string `json:"tokenFile"`
			} `json:"config"`
		} `json:"cluster,omitempty"`
	} `json:"spec"`
	Status *struct {
		Token string `json:"token"`
	} `json:"status,omitempty"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "execplugin:", err)
		os.Exit(1)
	}
}

func run() error {
	var in execCredential
	if err := json.Unmarshal([]byte(os.Getenv("KUBERNETES_EXEC_INFO")), &in); err != nil {
		return fmt.Errorf("KUBERNETES_EXEC_INFO: %w (is provideClusterInfo set?)", err)
	}
	if in.Spec.Cluster == nil || in.Spec.Cluster.Config.TokenFile == "" {
		return fmt.Errorf("no tokenFile in the cluster's exec configuration")
	}
	token, err := os.ReadFile(in.Spec.Cluster.Config.TokenFile)
	if err != nil {
		return err
	}
	out := execCredential{APIVersion: in.APIVersion, Kind: "ExecCredential"}
	out.Status = &struct {
		Token string `json:"token"`
	}{Token: strings.TrimSpace(string(token))}
	return json.NewEncoder(os.Stdout).Encode(out)
}
