package kubectlstrata

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"strata.dev/strata/pkg/migrate"
)

// kueueKinds are the kinds --from-cluster reads, in the order it reads
// them.
var kueueKinds = []string{"Topology", "ResourceFlavor", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass",
	"MultiKueueCluster", "MultiKueueConfig", "AdmissionCheck", "Cohort"}

func newMigrateCommand() *cobra.Command {
	var live liveFlags
	var files []string
	var fromCluster bool
	var opts migrate.Options
	cmd := &cobra.Command{
		Use:   "migrate (-f FILE_OR_DIR ... | --from-cluster)",
		Short: "Write the Strata objects that mean the same as Kueue's queues, flavors, topologies, priority classes and MultiKueue clusters",
		Long: `migrate reads Kueue objects (kueue.x-k8s.io, any version) from files, or
from a live cluster with --from-cluster, and writes the Strata objects that
mean the same to standard output, ready for kubectl apply:

  Topology, ResourceFlavor, ClusterQueue (resourceGroups, cohort,
  preemption, flavorFungibility), LocalQueue, WorkloadPriorityClass
                           the same names and shapes, apiVersion strata.dev/v1beta1
  MultiKueueCluster        a WorkerCluster with the same credentials (the
                           Secret must be copied to --hub-namespace), labelled
                           for each MultiKueueConfig that lists it
  MultiKueue's AdmissionCheck on a ClusterQueue
                           the hub ClusterQueue's clusterSelector

What cannot be carried over is printed on standard error, field by field,
with the reason; nothing is dropped silently. See docs/migrate.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (len(files) > 0) == fromCluster {
				return errors.New("pass the Kueue objects with -f FILE_OR_DIR, or read them from the cluster with --from-cluster (one or the other)")
			}
			if live.output != "yaml" && live.output != "json" {
				return fmt.Errorf("unknown output format %q (want yaml or json)", live.output)
			}
			var objs []*unstructured.Unstructured
			var err error
			if fromCluster {
				objs, err = readKueueFromCluster(cmd.Context(), &live)
			} else {
				objs, err = readKueueFiles(files)
			}
			if err != nil {
				return err
			}
			if len(objs) == 0 {
				return errors.New("no Kueue objects found")
			}
			res := migrate.Convert(objs, opts)
			if err := writeMigrated(cmd.OutOrStdout(), res, cmd.Flag("output").Value.String()); err != nil {
				return err
			}
			todo := 0
			for _, n := range res.Notes {
				what := "not carried over"
				if n.ToDo {
					what = "to do"
					todo++
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s\n", what, n)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "# %d Strata objects written; %d things not carried over; %d to do\n", len(res.Objects), len(res.Notes)-todo, todo)
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "file or directory of Kueue objects in YAML/JSON (repeatable)")
	cmd.Flags().BoolVar(&fromCluster, "from-cluster", false, "read the Kueue objects from the cluster of --kubeconfig/--context")
	cmd.Flags().StringVar(&opts.HubNamespace, "hub-namespace", "strata-system", "namespace of strata-hub, where WorkerClusters' kubeconfig Secrets must be")
	cmd.Flags().StringVar(&opts.ClusterProfileNamespace, "cluster-profile-namespace", "kueue-system", "namespace of the ClusterProfiles that MultiKueueClusters name")
	cmd.Flags().StringVar(&live.kubeconfig, "kubeconfig", "", "with --from-cluster: path to the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
	cmd.Flags().StringVar(&live.context, "context", "", "with --from-cluster: the kubeconfig context to use (default: the current context)")
	cmd.Flags().StringVarP(&live.output, "output", "o", "yaml", "output format: yaml or json")
	return cmd
}

// readKueueFiles reads the files, and the .yaml/.yml/.json files of the
// directories, as unstructured objects; lists are expanded.
func readKueueFiles(paths []string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, p := range paths {
		names := []string{p}
		if st, err := os.Stat(p); err != nil {
			return nil, err
		} else if st.IsDir() {
			entries, err := os.ReadDir(p)
			if err != nil {
				return nil, err
			}
			names = nil
			for _, e := range entries {
				switch strings.ToLower(filepath.Ext(e.Name())) {
				case ".yaml", ".yml", ".json":
					names = append(names, filepath.Join(p, e.Name()))
				}
			}
		}
		for _, name := range names {
			data, err := os.ReadFile(name)
			if err != nil {
				return nil, err
			}
			objs, err := decodeObjects(data)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			out = append(out, objs...)
		}
	}
	return out, nil
}

// decodeObjects decodes a YAML or JSON stream of objects.
func decodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for doc := 1; ; doc++ {
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.IsList() {
			list, err := u.ToList()
			if err != nil {
				return nil, fmt.Errorf("document %d: %w", doc, err)
			}
			// A typed list (ClusterQueueList, as the API returns it) leaves
			// its items' apiVersion and kind out: they are the list's.
			kind, hasKind := strings.CutSuffix(u.GetKind(), "List")
			for i := range list.Items {
				item := &list.Items[i]
				if item.GetKind() == "" && hasKind && kind != "" {
					item.SetKind(kind)
				}
				if item.GetAPIVersion() == "" {
					item.SetAPIVersion(u.GetAPIVersion())
				}
				out = append(out, item)
			}
			continue
		}
		if u.GetKind() == "" || u.GetAPIVersion() == "" {
			return nil, fmt.Errorf("document %d: no apiVersion or kind", doc)
		}
		out = append(out, u)
	}
}

// readKueueFromCluster lists every Kueue kind the cluster serves, at its
// preferred version.
func readKueueFromCluster(ctx context.Context, live *liveFlags) ([]*unstructured.Unstructured, error) {
	s, err := live.connect()
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	served := 0
	for _, kind := range kueueKinds {
		mapping, err := s.client.RESTMapper().RESTMapping(schema.GroupKind{Group: migrate.KueueGroup, Kind: kind})
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return nil, apiError(err, kind, strings.ToLower(kind)+"s", s.where)
		}
		served++
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(mapping.GroupVersionKind.GroupVersion().WithKind(kind + "List"))
		if err := s.client.List(ctx, list); err != nil {
			return nil, apiError(err, kind, mapping.Resource.Resource, s.where)
		}
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
	}
	if served == 0 {
		return nil, fmt.Errorf("%s serves no Kueue API (%s): is Kueue installed there?", s.where, migrate.KueueGroup)
	}
	return out, nil
}

// writeMigrated writes the objects as a YAML stream or a JSON list,
// without status or creationTimestamp.
func writeMigrated(w io.Writer, res migrate.Result, format string) error {
	items := make([]map[string]any, len(res.Objects))
	for i, o := range res.Objects {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return err
		}
		delete(m, "status")
		unstructured.RemoveNestedField(m, "metadata", "creationTimestamp")
		items[i] = m
	}
	if format == "json" {
		data, err := json.MarshalIndent(map[string]any{"apiVersion": "v1", "kind": "List", "items": items}, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", data)
		return err
	}
	for i, m := range items {
		data, err := yaml.Marshal(m)
		if err != nil {
			return err
		}
		if i > 0 {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
	}
	return nil
}
