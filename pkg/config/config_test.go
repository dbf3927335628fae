package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-inventory-api/pkg/access"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
)

func duration(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

func defaultAgent() *configv1beta1.AgentConfiguration {
	return &configv1beta1.AgentConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: "config.strata.dev/v1beta1", Kind: "AgentConfiguration"},
		TopologyAwareScheduling: configv1beta1.TopologyAwareScheduling{
			RequiredAlgorithm:      configv1beta1.BestFit,
			PreferredAlgorithm:     configv1beta1.BestFit,
			UnconstrainedAlgorithm: configv1beta1.LeastFreeCapacity,
		},
		NodeFailure: configv1beta1.NodeFailure{
			ReplaceFailedNodes:      ptr.To(true),
			NotReadyDelay:           duration(30 * time.Second),
			ReplaceOnPodTermination: ptr.To(true),
			ReplaceOnTaints:         ptr.To(true),
			FailFast:                ptr.To(true),
			RecoveryTimeout:         duration(10 * time.Minute),
		},
		Summary: configv1beta1.Summary{
			MaxBytes:          ptr.To[int32](512 * 1024),
			MinInterval:       duration(250 * time.Millisecond),
			MaxInterval:       duration(time.Second),
			HeartbeatInterval: duration(30 * time.Second),
		},
		Queueing: configv1beta1.Queueing{UngateBatchPeriod: duration(500 * time.Millisecond)},
		Fencing:  configv1beta1.AgentFencing{Namespace: "strata-system"},
		Events:   configv1beta1.Events{Admissions: configv1beta1.AdmissionEventsPerClusterQueue},
		WaitForPodsReady: configv1beta1.WaitForPodsReady{
			Enable: ptr.To(true), Timeout: duration(30 * time.Minute), BlockAdmission: ptr.To(false), RecoveryTimeout: duration(30 * time.Minute),
			RequeuingStrategy: configv1beta1.RequeuingStrategy{Timestamp: configv1beta1.EvictionTimestamp,
				BackoffBaseSeconds: ptr.To[int32](60), BackoffMaxSeconds: ptr.To[int32](3600)},
		},
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadAgent(t *testing.T) {
	const header = "apiVersion: config.strata.dev/v1beta1\nkind: AgentConfiguration\n"
	cases := map[string]struct {
		content string // "" with noFile: no file at all
		noFile  bool
		want    func() *configv1beta1.AgentConfiguration
		wantErr string
	}{
		"no file gives the defaults": {
			noFile: true,
			want:   defaultAgent,
		},
		"an empty configuration keeps the defaults": {
			content: header,
			want:    defaultAgent,
		},
		"set values win over defaults": {
			content: header + `topologyAwareScheduling:
  unconstrainedAlgorithm: BestFit
  balancedPlacement: true
nodeFailure:
  notReadyDelay: 1m
  failFast: false
summary:
  maxBytes: 65536
  heartbeatInterval: 10s
`,
			want: func() *configv1beta1.AgentConfiguration {
				c := defaultAgent()
				c.TopologyAwareScheduling.UnconstrainedAlgorithm = configv1beta1.BestFit
				c.TopologyAwareScheduling.BalancedPlacement = true
				c.NodeFailure.NotReadyDelay = duration(time.Minute)
				c.NodeFailure.FailFast = ptr.To(false)
				c.Summary.MaxBytes = ptr.To[int32](65536)
				c.Summary.HeartbeatInterval = duration(10 * time.Second)
				return c
			},
		},
		"summary: maxInterval follows a minInterval above its default": {
			content: header + "summary:\n  minInterval: 2s\n",
			want: func() *configv1beta1.AgentConfiguration {
				c := defaultAgent()
				c.Summary.MinInterval = duration(2 * time.Second)
				c.Summary.MaxInterval = duration(2 * time.Second)
				return c
			},
		},
		"summary: maxInterval follows a heartbeat under its default": {
			content: header + "summary:\n  heartbeatInterval: 500ms\n",
			want: func() *configv1beta1.AgentConfiguration {
				c := defaultAgent()
				c.Summary.HeartbeatInterval = duration(500 * time.Millisecond)
				c.Summary.MaxInterval = duration(500 * time.Millisecond)
				return c
			},
		},
		"waitForPodsReady: recoveryTimeout follows the timeout, a limit, blocking": {
			content: header + `waitForPodsReady:
  timeout: 10m
  blockAdmission: true
  requeuingStrategy:
    backoffLimitCount: 3
    backoffBaseSeconds: 5
`,
			want: func() *configv1beta1.AgentConfiguration {
				c := defaultAgent()
				w := &c.WaitForPodsReady
				w.Timeout, w.RecoveryTimeout, w.BlockAdmission = duration(10*time.Minute), duration(10*time.Minute), ptr.To(true)
				w.RequeuingStrategy.BackoffLimitCount, w.RequeuingStrategy.BackoffBaseSeconds = ptr.To[int32](3), ptr.To[int32](5)
				return c
			},
		},
		"waitForPodsReady off, and recovery not checked": {
			content: header + "waitForPodsReady:\n  enable: false\n  recoveryTimeout: 0s\n",
			want: func() *configv1beta1.AgentConfiguration {
				c := defaultAgent()
				c.WaitForPodsReady.Enable, c.WaitForPodsReady.RecoveryTimeout = ptr.To(false), duration(0)
				return c
			},
		},
		"waitForPodsReady: the Creation timestamp is refused with the reason": {
			content: header + "waitForPodsReady:\n  requeuingStrategy:\n    timestamp: Creation\n",
			wantErr: `waitForPodsReady.requeuingStrategy.timestamp: Invalid value: "Creation": not supported: strata-agent queues a requeued workload from its eviction`,
		},
		"waitForPodsReady: a zero timeout": {
			content: header + "waitForPodsReady:\n  timeout: 0s\n",
			wantErr: `waitForPodsReady.timeout: Invalid value: "0s": must be a positive duration`,
		},
		"waitForPodsReady: a backoff ceiling under its base": {
			content: header + "waitForPodsReady:\n  requeuingStrategy:\n    backoffBaseSeconds: 120\n    backoffMaxSeconds: 60\n",
			wantErr: "waitForPodsReady.requeuingStrategy.backoffMaxSeconds: Invalid value: 60: must be at least backoffBaseSeconds",
		},
		"fairSharing on, with Kueue's default strategies": {
			content: header + "fairSharing: {}\n",
			want: func() *configv1beta1.AgentConfiguration {
				c := defaultAgent()
				c.FairSharing = &configv1beta1.FairSharing{PreemptionStrategies: []configv1beta1.PreemptionStrategy{
					configv1beta1.LessThanOrEqualToFinalShare, configv1beta1.LessThanInitialShare}}
				return c
			},
		},
		"fairSharing: a strategy list Kueue refuses": {
			content: header + "fairSharing:\n  preemptionStrategies: [LessThanInitialShare, LessThanOrEqualToFinalShare]\n",
			wantErr: `fairSharing.preemptionStrategies: Unsupported value`,
		},
		"admissionFairSharing on: Kueue's sampling interval by default": {
			content: header + "admissionFairSharing:\n  usageHalfLifeTime: 168h\n  resourceWeights: {cpu: 2, memory: 0}\n",
			want: func() *configv1beta1.AgentConfiguration {
				c := defaultAgent()
				c.AdmissionFairSharing = &configv1beta1.AdmissionFairSharing{
					UsageHalfLifeTime:     metav1.Duration{Duration: 168 * time.Hour},
					UsageSamplingInterval: &metav1.Duration{Duration: 5 * time.Minute},
					ResourceWeights:       map[corev1.ResourceName]float64{corev1.ResourceCPU: 2, corev1.ResourceMemory: 0},
				}
				return c
			},
		},
		"admissionFairSharing: a negative half-life": {
			content: header + "admissionFairSharing:\n  usageHalfLifeTime: -1m\n",
			wantErr: `admissionFairSharing.usageHalfLifeTime: Invalid value: "-1m0s": must not be negative`,
		},
		"admissionFairSharing: a zero sampling interval": {
			content: header + "admissionFairSharing:\n  usageSamplingInterval: 0s\n",
			wantErr: `admissionFairSharing.usageSamplingInterval: Invalid value: "0s": must be a positive duration`,
		},
		"admissionFairSharing: a negative resource weight": {
			content: header + "admissionFairSharing:\n  resourceWeights: {cpu: -1}\n",
			wantErr: `admissionFairSharing.resourceWeights[cpu]: Invalid value: -1: must be a finite number, 0 or more`,
		},
		"an empty file": {
			content: "\n",
			wantErr: "is empty: want apiVersion config.strata.dev/v1beta1, kind AgentConfiguration",
		},
		"the wrong kind": {
			content: "apiVersion: config.strata.dev/v1beta1\nkind: HubConfiguration\n",
			wantErr: `has apiVersion "config.strata.dev/v1beta1", kind "HubConfiguration": want apiVersion "config.strata.dev/v1beta1", kind "AgentConfiguration"`,
		},
		"an unknown field": {
			content: header + "topologyAwareScheduling:\n  requiredAlgoritm: BestFit\n",
			wantErr: `unknown field "topologyAwareScheduling.requiredAlgoritm"`,
		},
		"malformed YAML": {
			content: header + "summary: [\n",
			wantErr: "parsing configuration",
		},
		"an unknown algorithm": {
			content: header + "topologyAwareScheduling:\n  preferredAlgorithm: MostFreeCapacity\n",
			wantErr: `topologyAwareScheduling.preferredAlgorithm: Unsupported value: "MostFreeCapacity": supported values: "BestFit", "LeastFreeCapacity"`,
		},
		"an unknown way to record admissions": {
			content: header + "events:\n  admissions: PerJob\n",
			wantErr: `events.admissions: Unsupported value: "PerJob": supported values: "PerClusterQueue", "PerWorkload"`,
		},
		"a negative delay": {
			content: header + "nodeFailure:\n  notReadyDelay: -1s\n",
			wantErr: "nodeFailure.notReadyDelay: Invalid value: \"-1s\": must be a positive duration",
		},
		"a summary budget above etcd's limit": {
			content: header + "summary:\n  maxBytes: 2000000\n",
			wantErr: "summary.maxBytes: Invalid value: 2000000: must be at most 1572864 bytes",
		},
		"a zero summary heartbeat": {
			content: header + "summary:\n  heartbeatInterval: 0s\n",
			wantErr: "summary.heartbeatInterval: Invalid value: \"0s\": must be a positive duration",
		},
		"a summary maxInterval under minInterval": {
			content: header + "summary:\n  minInterval: 2s\n  maxInterval: 1s\n",
			wantErr: "summary.maxInterval: Invalid value: \"1s\": must be at least summary.minInterval",
		},
		"a summary maxInterval over the heartbeat": {
			content: header + "summary:\n  maxInterval: 1m\n",
			wantErr: "summary.maxInterval: Invalid value: \"1m0s\": must be at most summary.heartbeatInterval",
		},
		"a summary heartbeat shorter than minInterval": {
			content: header + "summary:\n  minInterval: 2s\n  heartbeatInterval: 1s\n",
			wantErr: "summary.heartbeatInterval: Invalid value: \"1s\": must be at least summary.minInterval",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := ""
			if !tc.noFile {
				path = writeFile(t, tc.content)
			}
			got, err := LoadAgent(path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("LoadAgent() error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadAgent() unexpected error: %v", err)
			}
			if diff := cmp.Diff(tc.want(), got); diff != "" {
				t.Errorf("LoadAgent() (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestLoadAgentMissingFile(t *testing.T) {
	_, err := LoadAgent(filepath.Join(t.TempDir(), "absent.yaml"))
	if err == nil || !strings.Contains(err.Error(), "reading configuration") || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("LoadAgent(missing) error = %v, want a read error naming the file", err)
	}
}

const hubHeader = "apiVersion: config.strata.dev/v1beta1\nkind: HubConfiguration\n"

func TestLoadHub(t *testing.T) {
	cases := map[string]struct {
		content string
		want    func(*configv1beta1.HubConfiguration)
		wantErr string
	}{
		"defaults": {
			content: "apiVersion: config.strata.dev/v1beta1\nkind: HubConfiguration\n",
			want:    func(*configv1beta1.HubConfiguration) {},
		},
		"a custom timeout": {
			content: "apiVersion: config.strata.dev/v1beta1\nkind: HubConfiguration\ndispatch:\n  admissionTimeout: 90s\n",
			want: func(c *configv1beta1.HubConfiguration) {
				c.Dispatch.AdmissionTimeout = duration(90 * time.Second)
			},
		},
		"the spread policy": {
			content: "apiVersion: config.strata.dev/v1beta1\nkind: HubConfiguration\ndispatch:\n  placementPolicy: Spread\n",
			want: func(c *configv1beta1.HubConfiguration) {
				c.Dispatch.PlacementPolicy = configv1beta1.Spread
			},
		},
		"an event per admission": {
			content: "apiVersion: config.strata.dev/v1beta1\nkind: HubConfiguration\nevents:\n  admissions: PerWorkload\n",
			want: func(c *configv1beta1.HubConfiguration) {
				c.Events.Admissions = configv1beta1.AdmissionEventsPerWorkload
			},
		},
		"fair sharing between the hub's queues": {
			content: "apiVersion: config.strata.dev/v1beta1\nkind: HubConfiguration\nfairSharing:\n  preemptionStrategies: [LessThanInitialShare]\n",
			want: func(c *configv1beta1.HubConfiguration) {
				c.FairSharing = &configv1beta1.FairSharing{PreemptionStrategies: []configv1beta1.PreemptionStrategy{configv1beta1.LessThanInitialShare}}
			},
		},
		"admission fair sharing between a hub queue's LocalQueues": {
			content: "apiVersion: config.strata.dev/v1beta1\nkind: HubConfiguration\nadmissionFairSharing:\n  usageHalfLifeTime: 1h\n",
			want: func(c *configv1beta1.HubConfiguration) {
				c.AdmissionFairSharing = &configv1beta1.AdmissionFairSharing{UsageHalfLifeTime: metav1.Duration{Duration: time.Hour},
					UsageSamplingInterval: &metav1.Duration{Duration: 5 * time.Minute}}
			},
		},
		"admission fair sharing: a zero sampling interval": {
			content: "apiVersion: config.strata.dev/v1beta1\nkind: HubConfiguration\nadmissionFairSharing:\n  usageSamplingInterval: 0s\n",
			wantErr: `admissionFairSharing.usageSamplingInterval: Invalid value: "0s": must be a positive duration`,
		},
		"an unknown fair-sharing strategy": {
			content: "apiVersion: config.strata.dev/v1beta1\nkind: HubConfiguration\nfairSharing:\n  preemptionStrategies: [DominantShare]\n",
			wantErr: `fairSharing.preemptionStrategies: Unsupported value`,
		},
		"an unknown policy": {
			content: "apiVersion: config.strata.dev/v1beta1\nkind: HubConfiguration\ndispatch:\n  placementPolicy: Random\n",
			wantErr: `dispatch.placementPolicy: Unsupported value: "Random": supported values: "Compact", "Spread"`,
		},
		"a zero timeout": {
			content: "apiVersion: config.strata.dev/v1beta1\nkind: HubConfiguration\ndispatch:\n  admissionTimeout: 0s\n",
			wantErr: "dispatch.admissionTimeout: Invalid value: \"0s\": must be a positive duration",
		},
		"ClusterProfile access providers": {
			content: hubHeader + `clusterProfile:
  accessProviders:
  - name: open-cluster-management
    execConfig:
      command: /plugins/cp-creds
      args: ["--hub-namespace=strata-system"]
      env:
      - name: LOG_LEVEL
        value: "2"
      provideClusterInfo: true
    profileSourcedCLIArgsPolicy: Append
  - name: secretreader
    execConfig:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: /plugins/secretreader
      interactiveMode: Never
`,
			want: func(c *configv1beta1.HubConfiguration) {
				c.ClusterProfile.AccessProviders = []configv1beta1.AccessProvider{
					{
						Name: "open-cluster-management",
						ExecConfig: &clientcmdapi.ExecConfig{
							Command: "/plugins/cp-creds", Args: []string{"--hub-namespace=strata-system"},
							Env:        []clientcmdapi.ExecEnvVar{{Name: "LOG_LEVEL", Value: "2"}},
							APIVersion: "client.authentication.k8s.io/v1", ProvideClusterInfo: true, InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
						},
						ProfileSourcedCLIArgsPolicy: access.ProfileSourcedCLIArgsPolicyAppend,
					},
					{
						Name: "secretreader",
						ExecConfig: &clientcmdapi.ExecConfig{
							Command: "/plugins/secretreader", APIVersion: "client.authentication.k8s.io/v1beta1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
						},
					},
				}
			},
		},
		"a ManagedServiceAccount and ClusterProfile namespace of one's own": {
			content: hubHeader + "namespace: hub\nmanagedCluster:\n  serviceAccountName: batch-hub\n",
			want: func(c *configv1beta1.HubConfiguration) {
				c.Namespace = "hub"
				c.ManagedCluster = configv1beta1.ManagedCluster{ServiceAccountName: "batch-hub", ClusterProfileNamespace: "hub"}
			},
		},
		"an access provider without a name or plugin": {
			content: hubHeader + "clusterProfile:\n  accessProviders:\n  - execConfig:\n      command: x\n  - name: p\n",
			wantErr: "[clusterProfile.accessProviders[0].name: Required value: the name ClusterProfiles list the provider under, " +
				"clusterProfile.accessProviders[1].execConfig: Required value: the credential plugin to run]",
		},
		"two access providers of one name": {
			content: hubHeader + "clusterProfile:\n  accessProviders:\n  - name: p\n    execConfig: {command: a}\n  - name: p\n    execConfig: {command: b}\n",
			wantErr: `clusterProfile.accessProviders[1].name: Duplicate value: "p"`,
		},
		"an access provider without a command": {
			content: hubHeader + "clusterProfile:\n  accessProviders:\n  - name: p\n    execConfig: {args: [x]}\n",
			wantErr: "clusterProfile.accessProviders[0].execConfig.command: Required value",
		},
		"an interactive access provider": {
			content: hubHeader + "clusterProfile:\n  accessProviders:\n  - name: p\n    execConfig: {command: a, interactiveMode: IfAvailable}\n",
			wantErr: `clusterProfile.accessProviders[0].execConfig.interactiveMode: Unsupported value: "IfAvailable": supported values: "Never"`,
		},
		"an old ExecCredential version": {
			content: hubHeader + "clusterProfile:\n  accessProviders:\n  - name: p\n    execConfig: {command: a, apiVersion: client.authentication.k8s.io/v1alpha1}\n",
			wantErr: `clusterProfile.accessProviders[0].execConfig.apiVersion: Unsupported value: "client.authentication.k8s.io/v1alpha1"`,
		},
		"an unknown profile-sourced policy": {
			content: hubHeader + "clusterProfile:\n  accessProviders:\n  - name: p\n    execConfig: {command: a}\n    profileSourcedEnvVarsPolicy: Merge\n",
			wantErr: `clusterProfile.accessProviders[0].profileSourcedEnvVarsPolicy: Unsupported value: "Merge": supported values: "AppendIfNotExists", "Replace", "Ignore"`,
		},
		"an unknown exec field": {
			content: hubHeader + "clusterProfile:\n  accessProviders:\n  - name: p\n    execConfig: {cmd: a}\n",
			wantErr: `unknown field "clusterProfile.accessProviders[0].execConfig.cmd"`,
		},
		"fencing sooner: replaceAfter and renewInterval follow fenceAfter": {
			content: hubHeader + "fencing:\n  fenceAfter: 2m\n",
			want: func(c *configv1beta1.HubConfiguration) {
				c.Fencing.FenceAfter, c.Fencing.RenewInterval = duration(2*time.Minute), duration(24*time.Second)
			},
		},
		"fencing later: replaceAfter stays 5m beyond fenceAfter": {
			content: hubHeader + "fencing:\n  fenceAfter: 30m\n",
			want: func(c *configv1beta1.HubConfiguration) {
				c.Fencing.FenceAfter, c.Fencing.ReplaceAfter, c.Fencing.RenewInterval = duration(30*time.Minute), duration(35*time.Minute), duration(6*time.Minute)
			},
		},
		"replaceAfter within the clock margin of fenceAfter": {
			content: hubHeader + "fencing:\n  fenceAfter: 10m\n  replaceAfter: 10m30s\n",
			wantErr: `fencing.replaceAfter: Invalid value: "10m30s": must be at least fenceAfter (10m0s) + 1m0s`,
		},
		"renewals too rare": {
			content: hubHeader + "fencing:\n  fenceAfter: 10m\n  renewInterval: 5m\n",
			wantErr: `fencing.renewInterval: Invalid value: "5m0s": must be at most fenceAfter / 3 (3m20s)`,
		},
		"fencing disabled: no margin to keep": {
			content: hubHeader + "fencing:\n  mode: Disabled\n  fenceAfter: 10m\n  replaceAfter: 1m\n",
			want: func(c *configv1beta1.HubConfiguration) {
				c.Fencing.Mode, c.Fencing.ReplaceAfter = configv1beta1.FencingDisabled, duration(time.Minute)
			},
		},
		"an unknown fencing mode": {
			content: hubHeader + "fencing:\n  mode: Sometimes\n",
			wantErr: `fencing.mode: Unsupported value: "Sometimes": supported values: "Enabled", "Disabled"`,
		},
		"an invalid ManagedServiceAccount name": {
			content: hubHeader + "managedCluster:\n  serviceAccountName: Strata_Hub\n",
			wantErr: `managedCluster.serviceAccountName: Invalid value: "Strata_Hub"`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := LoadHub(writeFile(t, tc.content))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("LoadHub() error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadHub() unexpected error: %v", err)
			}
			want := &configv1beta1.HubConfiguration{
				TypeMeta: metav1.TypeMeta{APIVersion: "config.strata.dev/v1beta1", Kind: "HubConfiguration"},
				TopologyAwareScheduling: configv1beta1.TopologyAwareScheduling{
					RequiredAlgorithm:      configv1beta1.BestFit,
					PreferredAlgorithm:     configv1beta1.BestFit,
					UnconstrainedAlgorithm: configv1beta1.LeastFreeCapacity,
				},
				Dispatch: configv1beta1.Dispatch{
					AdmissionTimeout:    duration(5 * time.Minute),
					PendingTimeout:      duration(30 * time.Second),
					SummaryStaleAfter:   duration(2 * time.Minute),
					WorkerNamespace:     "strata-system",
					PlacementPolicy:     configv1beta1.Compact,
					RejectionBackoff:    duration(time.Minute),
					FinishedRetention:   duration(10 * time.Minute),
					OrphanCheckInterval: duration(time.Minute),
					SummaryCopyInterval: duration(10 * time.Second),
				},
				Origin:         "strata-hub",
				Namespace:      "strata-system",
				ManagedCluster: configv1beta1.ManagedCluster{ServiceAccountName: "strata-hub", ClusterProfileNamespace: "strata-system"},
				Fencing: configv1beta1.Fencing{Mode: configv1beta1.FencingEnabled, FenceAfter: duration(10 * time.Minute),
					ReplaceAfter: duration(15 * time.Minute), RenewInterval: duration(2 * time.Minute)},
				Events: configv1beta1.Events{Admissions: configv1beta1.AdmissionEventsPerClusterQueue},
			}
			tc.want(want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("LoadHub() (-want,+got):\n%s", diff)
			}
		})
	}
}
