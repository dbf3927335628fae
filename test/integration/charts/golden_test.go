// Package charts renders the strata-hub and strata-agent Helm charts with
// the real helm and compares the output to golden files, so that every
// change to what a chart installs shows up in review. Beside the golden
// files, it checks what must hold whatever they say: least privilege, a
// locked-down container, a metrics path that connects, and a
// configuration file the binaries accept.
//
//	go test ./test/integration/charts/ -update   # rewrite testdata/<case>.yaml
package charts

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"strata.dev/strata/pkg/config"
	"strata.dev/strata/test/integration/framework"
)

var update = flag.Bool("update", false, "rewrite testdata/<case>.yaml from the rendered charts")

const (
	// kubeVersion is what helm renders for: the cluster version the
	// repository's binaries are built at, so that the output does not
	// depend on helm's built-in default.
	kubeVersion = "1.37.1"
	// nonRootID is the uid and gid the images run as.
	nonRootID = 65532
	// hubAccessName is the agent chart's default hubAccess.name.
	hubAccessName = "strata-hub-access"
)

// renderCase is one helm template invocation. The release is named after
// the chart, as the docs and the e2e suites install it.
type renderCase struct {
	chart     string
	namespace string
	set       []string
	// check asserts what this combination of values must render, beyond
	// the checks every case gets.
	check func(t *testing.T, r *rendered)
}

func TestGolden(t *testing.T) {
	helm := helmBinary(t)
	cases := map[string]renderCase{
		"hub-defaults": {
			chart:     "strata-hub",
			namespace: "strata-system",
			check: func(t *testing.T, r *rendered) {
				wantReplicas(t, r, 1)
				wantServiceMonitor(t, r, false)
			},
		},
		"hub-ha-servicemonitor": {
			chart:     "strata-hub",
			namespace: "strata-system",
			set:       []string{"replicas=2", "metrics.serviceMonitor.enabled=true"},
			check: func(t *testing.T, r *rendered) {
				wantReplicas(t, r, 2)
				wantServiceMonitor(t, r, true)
			},
		},
		"hub-plugin-extra-args": {
			chart:     "strata-hub",
			namespace: "strata-system",
			set: []string{"extraArgs={--zap-log-level=2}", "extraVolumes[0].name=plugins", "extraVolumes[0].hostPath.path=/opt/strata/plugins",
				"extraVolumeMounts[0].name=plugins", "extraVolumeMounts[0].mountPath=/plugins", "extraVolumeMounts[0].readOnly=true",
				"extraEnv[0].name=GOMEMLIMIT", "extraEnv[0].value=3GiB"},
			check: func(t *testing.T, r *rendered) {
				d := decode[appsv1.Deployment](t, r.all("Deployment")[0])
				pod := d.Spec.Template.Spec
				if env := pod.Containers[0].Env; len(env) != 1 || env[0].Name != "GOMEMLIMIT" || env[0].Value != "3GiB" {
					t.Errorf("container env %+v: want GOMEMLIMIT=3GiB", env)
				}
				if c := pod.Containers[0]; !slices.Contains(c.Args, "--zap-log-level=2") || len(c.VolumeMounts) != 2 || c.VolumeMounts[1].MountPath != "/plugins" {
					t.Errorf("container args %v, mounts %+v: want the extra argument and the plugins mount", c.Args, c.VolumeMounts)
				}
				if len(pod.Volumes) != 2 || pod.Volumes[1].HostPath == nil || pod.Volumes[1].HostPath.Path != "/opt/strata/plugins" {
					t.Errorf("volumes %+v: want the config and the plugins volume", pod.Volumes)
				}
			},
		},
		"hub-dashboard": {
			chart:     "strata-hub",
			namespace: "strata-system",
			set:       []string{"dashboard.enabled=true"},
			check: func(t *testing.T, r *rendered) {
				d := decode[appsv1.Deployment](t, r.find("Deployment", "strata-dashboard"))
				c := d.Spec.Template.Spec.Containers[0]
				if want := []string{"dashboard", "--address", "127.0.0.1:8001"}; !slices.Equal(c.Args, want) {
					t.Errorf("dashboard args %v, want %v: loopback only, reached by port-forward", c.Args, want)
				}
				if d.Spec.Template.Spec.ServiceAccountName != "strata-dashboard" {
					t.Errorf("dashboard service account %q, want its own", d.Spec.Template.Spec.ServiceAccountName)
				}
				role := decode[rbacv1.ClusterRole](t, r.find("ClusterRole", "strata-dashboard"))
				for _, rule := range role.Rules {
					for _, v := range rule.Verbs {
						if v != "get" && v != "list" && v != "watch" {
							t.Errorf("ClusterRole strata-dashboard grants %q on %v: want reads only", v, rule.Resources)
						}
					}
					if slices.Contains(rule.Resources, "secrets") {
						t.Errorf("ClusterRole strata-dashboard grants %v on Secrets: it reads the hub's copies of the summaries, no worker credential", rule.Verbs)
					}
				}
				if r.find("Role", "strata-dashboard") != nil {
					t.Error("a Role strata-dashboard: the dashboard needs nothing in the hub's namespace")
				}
			},
		},
		"agent-defaults": {
			chart:     "strata-agent",
			namespace: "strata-system",
			check: func(t *testing.T, r *rendered) {
				wantReplicas(t, r, 1)
				wantServiceMonitor(t, r, false)
				wantHubAccess(t, r, true, false)
			},
		},
		"agent-no-hub-access": {
			chart:     "strata-agent",
			namespace: "strata-system",
			set:       []string{"hubAccess.create=false"},
			check: func(t *testing.T, r *rendered) {
				wantHubAccess(t, r, false, false)
			},
		},
		"agent-hub-namespaces": {
			chart:     "strata-agent",
			namespace: "strata-system",
			set:       []string{"hubAccess.namespaces={team-a,team-b}"},
			check: func(t *testing.T, r *rendered) {
				wantHubAccess(t, r, true, false)
				if r.find("ClusterRoleBinding", hubAccessName+"-copies") != nil {
					t.Errorf("hubAccess.namespaces set, yet the copies role is bound cluster-wide")
				}
				var where []string
				for _, o := range r.all("RoleBinding") {
					if o.Name == hubAccessName+"-copies" {
						where = append(where, o.Namespace)
					}
				}
				if diff := cmp.Diff([]string{"team-a", "team-b"}, where); diff != "" {
					t.Errorf("copies RoleBindings (-want,+got):\n%s", diff)
				}
			},
		},
		"agent-create-namespaces-team-a": {
			chart:     "strata-agent",
			namespace: "team-a",
			set:       []string{"hubAccess.createNamespaces=true"},
			check: func(t *testing.T, r *rendered) {
				wantHubAccess(t, r, true, true)
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			args := []string{"--namespace", tc.namespace}
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			out, err := helmTemplate(t, helm, tc.chart, args...)
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", name+".yaml")
			if *update {
				if err := os.WriteFile(golden, out, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), string(out)); diff != "" {
				t.Errorf("helm template %s differs from %s (-want,+got); run with -update if intended:\n%s", tc.chart, golden, diff)
			}

			r := parse(t, tc.chart, tc.namespace, out)
			checkCommon(t, r)
			tc.check(t, r)
		})
	}
}

// TestLeaderElectionRequired: two replicas that both act would admit or
// dispatch the same capacity twice, so the charts refuse to render them.
func TestLeaderElectionRequired(t *testing.T) {
	helm := helmBinary(t)
	for _, chart := range []string{"strata-hub", "strata-agent"} {
		t.Run(chart, func(t *testing.T) {
			_, err := helmTemplate(t, helm, chart, "--set", "replicas=2", "--set", "leaderElect=false")
			if err == nil || !strings.Contains(err.Error(), "needs leaderElect=true") {
				t.Errorf("helm template with replicas=2, leaderElect=false: got error %v, want one saying it needs leaderElect=true", err)
			}
		})
	}
}

// TestValuesExample renders each chart with the commented configuration
// example of its values.yaml, uncommented, and loads the result as the
// binary would: the example must name real fields with valid values.
func TestValuesExample(t *testing.T) {
	helm := helmBinary(t)
	for _, chart := range []string{"strata-hub", "strata-agent"} {
		t.Run(chart, func(t *testing.T) {
			example, err := valuesExample(filepath.Join(framework.RepoRoot(), "charts", chart, "values.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			values := filepath.Join(t.TempDir(), "values.yaml")
			if err := os.WriteFile(values, example, 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := helmTemplate(t, helm, chart, "--namespace", "strata-system", "--values", values)
			if err != nil {
				t.Fatal(err)
			}
			r := parse(t, chart, "strata-system", out)
			checkCommon(t, r)
			var v struct {
				Config map[string]any `json:"config"`
			}
			if err := yaml.UnmarshalStrict(example, &v); err != nil {
				t.Fatalf("values example: %v", err)
			}
			if len(v.Config) == 0 {
				t.Errorf("the values example sets no configuration:\n%s", example)
			}
		})
	}
}

// valuesExample is the block of comment lines from "# config:" up to the
// real "config:" value, without the comment marks.
func valuesExample(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	in := false
	for line := range strings.Lines(string(data)) {
		switch {
		case strings.TrimRight(line, "\n") == "# config:":
			in = true
		case in && !strings.HasPrefix(line, "#"):
			return out.Bytes(), nil
		}
		if in {
			line = strings.TrimPrefix(strings.TrimPrefix(line, "#"), " ")
			out.WriteString(line)
		}
	}
	return nil, fmt.Errorf("%s has no commented example starting with %q", path, "# config:")
}

// helmBinary is the helm that hack/k8s-binaries.sh builds; without it the
// tests skip, as the other integration suites do without their binaries.
func helmBinary(t *testing.T) string {
	t.Helper()
	dir, err := framework.BinDir()
	if err != nil {
		t.Skip(err)
	}
	helm := filepath.Join(dir, "helm")
	if _, err := os.Stat(helm); err != nil {
		t.Skipf("helm not found in %s: run 'make k8s-binaries' (or set STRATA_K8S_BIN)", dir)
	}
	return helm
}

// helmTemplate renders one of the repository's charts, released under its
// own name, with helm's configuration kept away from the user's.
func helmTemplate(t *testing.T, helm, chart string, args ...string) ([]byte, error) {
	t.Helper()
	home := t.TempDir()
	args = append([]string{"template", chart, filepath.Join(framework.RepoRoot(), "charts", chart),
		"--kube-version", kubeVersion}, args...)
	cmd := exec.Command(helm, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// object is one rendered document.
type object struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	raw               []byte
}

func (o *object) String() string { return o.Kind + " " + o.Name }

// rendered is one chart's output.
type rendered struct {
	chart     string
	namespace string
	objects   []*object
}

func parse(t *testing.T, chart, namespace string, out []byte) *rendered {
	t.Helper()
	r := &rendered{chart: chart, namespace: namespace}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading the rendered documents: %v", err)
		}
		o := &object{raw: doc}
		if err := yaml.Unmarshal(doc, o); err != nil {
			t.Fatalf("parsing a rendered document: %v\n%s", err, doc)
		}
		if o.Kind == "" { // only comments
			continue
		}
		r.objects = append(r.objects, o)
	}
	return r
}

// find returns the object of that kind and name, or nil.
func (r *rendered) find(kind, name string) *object {
	for _, o := range r.objects {
		if o.Kind == kind && o.Name == name {
			return o
		}
	}
	return nil
}

// all returns the objects of one kind.
func (r *rendered) all(kind string) []*object {
	var out []*object
	for _, o := range r.objects {
		if o.Kind == kind {
			out = append(out, o)
		}
	}
	return out
}

// decode decodes o strictly into a T: a field the API type does not have
// (a typo, a wrong indentation) is an error.
func decode[T any](t *testing.T, o *object) *T {
	t.Helper()
	var v T
	if err := yaml.UnmarshalStrict(o.raw, &v); err != nil {
		t.Fatalf("%s: %v", o, err)
	}
	return &v
}

// clusterScoped are the kinds the charts render without a namespace.
var clusterScoped = []string{"ClusterRole", "ClusterRoleBinding", "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding",
	"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}

// checkCommon checks what every rendering must satisfy.
func checkCommon(t *testing.T, r *rendered) {
	t.Helper()
	for _, o := range r.objects {
		gvk := schema.FromAPIVersionAndKind(o.APIVersion, o.Kind)
		if obj, err := clientgoscheme.Scheme.New(gvk); err == nil {
			if err := yaml.UnmarshalStrict(o.raw, obj); err != nil {
				t.Errorf("%s is not a valid %s: %v", o, gvk, err)
			}
		} else if gvk != (schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}) {
			t.Errorf("%s: unexpected kind %s", o, gvk)
		}
		if slices.Contains(clusterScoped, o.Kind) {
			if o.Namespace != "" {
				t.Errorf("%s is cluster-scoped but has namespace %q", o, o.Namespace)
			}
		} else if o.Namespace != r.namespace && (o.Kind != "RoleBinding" || o.Name != hubAccessName+"-copies") {
			// The hub's copies RoleBindings go to hubAccess.namespaces.
			t.Errorf("%s is in namespace %q, want the release's, %q", o, o.Namespace, r.namespace)
		}
	}
	checkRBAC(t, r)
	pod := checkDeployment(t, r)
	checkMetrics(t, r, pod)
	checkConfig(t, r)
}

// checkRBAC: no wildcard anywhere, no Secrets cluster-wide except by name,
// and every binding connects a rendered role to a rendered ServiceAccount.
func checkRBAC(t *testing.T, r *rendered) {
	t.Helper()
	for _, kind := range []string{"ClusterRole", "Role"} {
		for _, o := range r.all(kind) {
			for i, rule := range decode[rbacv1.ClusterRole](t, o).Rules {
				for _, field := range [][]string{rule.APIGroups, rule.Resources, rule.Verbs, rule.ResourceNames} {
					if slices.Contains(field, "*") {
						t.Errorf("%s rule %d grants *: %+v", o, i, rule)
					}
				}
				for _, v := range []string{"escalate", "bind", "impersonate"} {
					if slices.Contains(rule.Verbs, v) {
						t.Errorf("%s rule %d grants %s", o, i, v)
					}
				}
				if kind == "ClusterRole" && slices.Contains(rule.APIGroups, "") &&
					slices.Contains(rule.Resources, "secrets") && len(rule.ResourceNames) == 0 {
					t.Errorf("%s rule %d grants %v on every Secret of the cluster", o, i, rule.Verbs)
				}
			}
		}
	}
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		for _, o := range r.all(kind) {
			b := decode[rbacv1.RoleBinding](t, o)
			if r.find(b.RoleRef.Kind, b.RoleRef.Name) == nil {
				t.Errorf("%s refers to %s %s, which the chart does not render", o, b.RoleRef.Kind, b.RoleRef.Name)
			}
			if b.RoleRef.Kind == "Role" && kind == "ClusterRoleBinding" {
				t.Errorf("%s refers to a Role", o)
			}
			for _, s := range b.Subjects {
				if s.Kind != rbacv1.ServiceAccountKind || s.Namespace != r.namespace || r.find("ServiceAccount", s.Name) == nil {
					t.Errorf("%s binds %s %s/%s, want a ServiceAccount of the chart in %s", o, s.Kind, s.Namespace, s.Name, r.namespace)
				}
			}
		}
	}
}

// checkDeployment checks the chart's Deployments and returns the
// template of the binary's. Besides the binary's, the hub chart may run
// the dashboard (its own ServiceAccount, the same hardening).
func checkDeployment(t *testing.T, r *rendered) *corev1.PodTemplateSpec {
	t.Helper()
	var main *appsv1.Deployment
	for _, o := range r.all("Deployment") {
		d := decode[appsv1.Deployment](t, o)
		checkPod(t, r, d)
		switch o.Name {
		case r.chart:
			main = d
		case "strata-dashboard":
		default:
			t.Errorf("unexpected Deployment %s", o)
		}
	}
	if main == nil {
		t.Fatalf("no Deployment %s", r.chart)
	}
	pod := &main.Spec.Template
	c := pod.Spec.Containers[0]
	replicas := int32(1)
	if main.Spec.Replicas != nil {
		replicas = *main.Spec.Replicas
	}
	for _, arg := range []string{"--metrics-bind-address=:8080", "--health-probe-bind-address=:8081", "--leader-election-namespace=" + r.namespace} {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("container %s args %v lack %s", c.Name, c.Args, arg)
		}
	}
	if replicas > 1 && !slices.Contains(c.Args, "--leader-elect=true") {
		t.Errorf("%d replicas without --leader-elect=true: %v", replicas, c.Args)
	}
	wantPorts := []corev1.ContainerPort{{Name: "metrics", ContainerPort: 8080}, {Name: "health", ContainerPort: 8081}}
	if diff := cmp.Diff(wantPorts, c.Ports); diff != "" {
		t.Errorf("container %s ports (-want,+got):\n%s", c.Name, diff)
	}
	for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Port.String() != "health" {
			t.Errorf("container %s: %s probe %+v, want an HTTP GET on port health", c.Name, name, p)
		}
	}
	if len(c.Resources.Requests) == 0 || len(c.Resources.Limits) != 0 {
		t.Errorf("container %s resources %v: want requests and, by default, no limits", c.Name, c.Resources)
	}
	return pod
}

// checkPod checks what every Deployment of the charts must have: labels
// its selector matches, a rendered ServiceAccount and ConfigMaps, one
// container, non-root and hardened.
func checkPod(t *testing.T, r *rendered, d *appsv1.Deployment) {
	t.Helper()
	pod := &d.Spec.Template
	if !mapContains(pod.Labels, d.Spec.Selector.MatchLabels) {
		t.Errorf("%s: the pod's labels %v do not match the Deployment's selector %v", d.Name, pod.Labels, d.Spec.Selector.MatchLabels)
	}
	if r.find("ServiceAccount", pod.Spec.ServiceAccountName) == nil {
		t.Errorf("%s: the pod runs as ServiceAccount %q, which the chart does not render", d.Name, pod.Spec.ServiceAccountName)
	}
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap != nil && r.find("ConfigMap", v.ConfigMap.Name) == nil {
			t.Errorf("%s: volume %s mounts ConfigMap %q, which the chart does not render", d.Name, v.Name, v.ConfigMap.Name)
		}
	}
	wantPod := &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr(true),
		RunAsUser:      ptr[int64](nonRootID),
		RunAsGroup:     ptr[int64](nonRootID),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	if diff := cmp.Diff(wantPod, pod.Spec.SecurityContext); diff != "" {
		t.Errorf("%s: pod securityContext (-want,+got):\n%s", d.Name, diff)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%s: got %d containers, want 1", d.Name, len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	wantContainer := &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr(false),
		ReadOnlyRootFilesystem:   ptr(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	if diff := cmp.Diff(wantContainer, c.SecurityContext); diff != "" {
		t.Errorf("%s: container %s securityContext (-want,+got):\n%s", d.Name, c.Name, diff)
	}
}

// checkMetrics: the metrics Service reaches the pod's metrics port, and a
// ServiceMonitor, when there is one, selects that Service.
func checkMetrics(t *testing.T, r *rendered, pod *corev1.PodTemplateSpec) {
	t.Helper()
	o := r.find("Service", r.chart+"-metrics")
	if o == nil {
		t.Fatalf("no Service %s-metrics", r.chart)
	}
	svc := decode[corev1.Service](t, o)
	if len(svc.Spec.Selector) == 0 || !mapContains(pod.Labels, svc.Spec.Selector) {
		t.Errorf("Service %s selects %v, not the pod (labels %v)", svc.Name, svc.Spec.Selector, pod.Labels)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "metrics" || svc.Spec.Ports[0].Port != 8080 ||
		svc.Spec.Ports[0].TargetPort.String() != "metrics" {
		t.Errorf("Service %s ports %+v, want 8080 named metrics to the container port metrics", svc.Name, svc.Spec.Ports)
	}
	for _, o := range r.all("ServiceMonitor") {
		var sm struct {
			Spec struct {
				Selector  metav1.LabelSelector `json:"selector"`
				Endpoints []map[string]any     `json:"endpoints"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(o.raw, &sm); err != nil {
			t.Fatalf("%s: %v", o, err)
		}
		if !mapContains(svc.Labels, sm.Spec.Selector.MatchLabels) {
			t.Errorf("%s selects %v, not Service %s (labels %v)", o, sm.Spec.Selector.MatchLabels, svc.Name, svc.Labels)
		}
		// The pods' own labels alone would select any other Service of the
		// release too.
		if sm.Spec.Selector.MatchLabels["app.kubernetes.io/component"] != "metrics" {
			t.Errorf("%s selector %v would match Services other than the metrics one", o, sm.Spec.Selector.MatchLabels)
		}
		want := []map[string]any{{"port": "metrics", "path": "/metrics", "scheme": "http", "interval": "30s"}}
		if diff := cmp.Diff(want, sm.Spec.Endpoints); diff != "" {
			t.Errorf("%s endpoints (-want,+got):\n%s", o, diff)
		}
	}
}

// checkConfig loads the rendered configuration file as the binary does.
func checkConfig(t *testing.T, r *rendered) {
	t.Helper()
	o := r.find("ConfigMap", r.chart+"-config")
	if o == nil {
		t.Fatalf("no ConfigMap %s-config", r.chart)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(decode[corev1.ConfigMap](t, o).Data["config.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	switch r.chart {
	case "strata-hub":
		cfg, err := config.LoadHub(path)
		if err != nil {
			t.Fatalf("strata-hub would not start: %v", err)
		}
		// The Role that lets the hub read kubeconfig Secrets is in the
		// release's namespace; the hub must look there.
		if cfg.Namespace != r.namespace {
			t.Errorf("HubConfiguration namespace %q, want the release's, %q", cfg.Namespace, r.namespace)
		}
	case "strata-agent":
		if _, err := config.LoadAgent(path); err != nil {
			t.Fatalf("strata-agent would not start: %v", err)
		}
	}
}

func wantReplicas(t *testing.T, r *rendered, want int32) {
	t.Helper()
	d := decode[appsv1.Deployment](t, r.all("Deployment")[0])
	if d.Spec.Replicas == nil || *d.Spec.Replicas != want {
		t.Errorf("Deployment replicas %v, want %d", d.Spec.Replicas, want)
	}
}

func wantServiceMonitor(t *testing.T, r *rendered, want bool) {
	t.Helper()
	wantN := 0
	if want {
		wantN = 1
	}
	if got := len(r.all("ServiceMonitor")); got != wantN {
		t.Errorf("got %d ServiceMonitors, want %d", got, wantN)
	}
}

// wantHubAccess checks the identity the hub uses on a worker: a
// ServiceAccount with a token, bound to a ClusterRole that reads summaries
// and copies and creates and deletes Jobs (and namespaces, if asked), and
// nothing of Secrets, Pods or Nodes.
func wantHubAccess(t *testing.T, r *rendered, create, createNamespaces bool) {
	t.Helper()
	if !create {
		for _, o := range r.objects {
			if strings.HasPrefix(o.Name, hubAccessName) {
				t.Errorf("hubAccess.create=false, yet %s is rendered", o)
			}
		}
		return
	}
	for _, kind := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding"} {
		if r.find(kind, hubAccessName) == nil {
			t.Errorf("no %s %s", kind, hubAccessName)
		}
	}
	for _, kind := range []string{"ClusterRole", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		name := hubAccessName + "-copies"
		if kind != "ClusterRole" {
			name = hubAccessName + "-protected-namespaces"
		}
		if r.find(kind, name) == nil {
			t.Errorf("no %s %s", kind, name)
		}
	}
	if o := r.find("Secret", hubAccessName+"-token"); o == nil {
		t.Errorf("no Secret %s-token", hubAccessName)
	} else if s := decode[corev1.Secret](t, o); s.Type != corev1.SecretTypeServiceAccountToken ||
		s.Annotations[corev1.ServiceAccountNameKey] != hubAccessName {
		t.Errorf("Secret %s is not a token of ServiceAccount %s: type %s, annotations %v", s.Name, hubAccessName, s.Type, s.Annotations)
	}
	o := r.find("ClusterRole", hubAccessName)
	if o == nil {
		return
	}
	var namespaces []string
	for i, rule := range decode[rbacv1.ClusterRole](t, o).Rules {
		for _, res := range rule.Resources {
			switch res {
			case "secrets", "pods", "nodes":
				t.Errorf("%s rule %d grants %v on %s", o, i, rule.Verbs, res)
			case "namespaces":
				if len(rule.ResourceNames) > 0 {
					t.Errorf("%s rule %d grants %v on namespaces %v: want no rule by name", o, i, rule.Verbs, rule.ResourceNames)
				}
				namespaces = append(namespaces, rule.Verbs...)
			}
		}
	}
	// Read (the cluster's identity, which namespaces exist and their
	// labels); create only when the hub creates them.
	want := []string{"get", "list", "watch"}
	if createNamespaces {
		want = append(want, "create")
	}
	if diff := cmp.Diff(want, namespaces); diff != "" {
		t.Errorf("%s verbs on namespaces (-want,+got):\n%s", o, diff)
	}
}

// mapContains reports whether m has every key of sub with the same value.
func mapContains(m, sub map[string]string) bool {
	for k, v := range sub {
		if got, ok := m[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func ptr[T any](v T) *T { return &v }
