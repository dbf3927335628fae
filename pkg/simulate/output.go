package simulate

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"
)

// Formats of Write.
var Formats = []string{"table", "json", "yaml"}

// Write prints results as a table, a JSON array or YAML.
func Write(w io.Writer, results []Result, format string) error {
	if results == nil {
		results = []Result{}
	}
	switch format {
	case "json":
		data, err := json.MarshalIndent(results, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", data)
		return err
	case "yaml":
		data, err := yaml.Marshal(results)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	case "table", "":
		return writeTable(w, results)
	}
	return fmt.Errorf("unknown output format %q (want one of %s)", format, strings.Join(Formats, ", "))
}

func writeTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fleet := len(results) > 0 && results[0].Cluster != nil
	if fleet {
		fmt.Fprintln(tw, "NAMESPACE\tNAME\tADMITTED\tCLUSTER\tFLAVOR\tPODSET\tPODS\tPLACEMENT (DOMAIN=PODS [RANKS])")
	} else {
		fmt.Fprintln(tw, "NAMESPACE\tNAME\tADMITTED\tFLAVOR\tPODSET\tPODS\tPLACEMENT (DOMAIN=PODS [RANKS])")
	}
	for _, r := range results {
		cluster := ""
		if fleet {
			cluster = "-\t"
			if r.Cluster != nil && *r.Cluster != "" {
				cluster = *r.Cluster + "\t"
			}
		}
		if !r.Admitted || len(r.PodSets) == 0 {
			// Not admitted, or running already without an assignment the
			// input shows (a hub Workload dispatched before): the reason.
			fmt.Fprintf(tw, "%s\t%s\t%t\t%s-\t-\t-\t%s\n", r.Namespace, r.Name, r.Admitted, cluster, r.Reason)
			continue
		}
		for i, ps := range r.PodSets {
			placement := placementOf(ps)
			if i == 0 && len(r.Preempts) > 0 {
				placement += "; would preempt " + strings.Join(r.Preempts, ", ")
			}
			if i == 0 && !fleet && r.Reason != "" {
				// A victim admitted again says so.
				placement += "; " + r.Reason
			}
			fmt.Fprintf(tw, "%s\t%s\ttrue\t%s%s\t%s\t%d\t%s\n", r.Namespace, r.Name, cluster, ps.Flavor, ps.Name, ps.Count, placement)
		}
	}
	return tw.Flush()
}

// placementOf is "host-1=4 [0-3], host-2=4 [4-7]": each domain (values
// joined by '/'), its pods, and the ranks (pod indexes) it holds.
func placementOf(ps PodSetResult) string {
	if ps.DelayedTopology {
		return "topology delayed (ProvisioningRequest)"
	}
	parts := make([]string, 0, len(ps.Domains))
	rank := int32(0)
	for _, d := range ps.Domains {
		ranks := fmt.Sprint(rank)
		if d.Count > 1 {
			ranks = fmt.Sprintf("%d-%d", rank, rank+d.Count-1)
		}
		parts = append(parts, fmt.Sprintf("%s=%d [%s]", strings.Join(d.Values, "/"), d.Count, ranks))
		rank += d.Count
	}
	return strings.Join(parts, ", ")
}
