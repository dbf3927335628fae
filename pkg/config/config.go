// Package config loads, defaults and validates the configuration files of
// strata-agent and strata-hub.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-inventory-api/pkg/access"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	configv1beta1 "strata.dev/strata/api/config/v1beta1"
)

// Defaults, following KEP-2724's recommended behaviour.
const (
	DefaultNotReadyDelay   = 30 * time.Second
	DefaultRecoveryTimeout = 10 * time.Minute
	DefaultSummaryMaxBytes = 512 * 1024
	// DefaultHubNamespace is where the hub runs and reads kubeconfig
	// Secrets from, and where it looks for the ClusterProfiles OCM
	// publishes.
	DefaultHubNamespace       = "strata-system"
	DefaultSummaryMinInterval = 250 * time.Millisecond
	// DefaultSummaryMaxInterval is how far the time between two writes of
	// a summary grows while the capacity keeps changing.
	DefaultSummaryMaxInterval = time.Second
	// DefaultSummaryHeartbeatInterval is well under DefaultSummaryStaleAfter,
	// so that a quiet worker's summary never looks stale to the hub.
	DefaultSummaryHeartbeatInterval = 30 * time.Second
	DefaultUngateBatchPeriod        = 500 * time.Millisecond
	// DefaultUsageSamplingInterval is Kueue's admissionFairSharing default.
	DefaultUsageSamplingInterval = 5 * time.Minute
	// DefaultPodsReadyTimeout and the requeuing backoff are Kueue's
	// (configuration v1beta2).
	DefaultPodsReadyTimeout     = 30 * time.Minute
	DefaultRequeuingBackoffBase = 60
	DefaultRequeuingBackoffMax  = 3600
	DefaultAdmissionTimeout     = 5 * time.Minute
	DefaultPendingTimeout       = 30 * time.Second
	DefaultSummaryStaleAfter    = 2 * time.Minute
	DefaultWorkerNamespace      = "strata-system"
	// DefaultOrigin labels the copies a hub creates on its workers.
	DefaultOrigin              = "strata-hub"
	DefaultRejectionBackoff    = time.Minute
	DefaultFinishedRetention   = 10 * time.Minute
	DefaultOrphanCheckInterval = time.Minute
	// DefaultSummaryCopyInterval spaces the hub's writes of its copies of
	// the workers' summaries.
	DefaultSummaryCopyInterval = 10 * time.Second
	// DefaultManagedServiceAccount is the ManagedServiceAccount whose token
	// the hub uses on an OCM ManagedCluster.
	DefaultManagedServiceAccount = "strata-hub"
	// DefaultExecAPIVersion is the ExecCredential version the hub asks
	// access providers' plugins for.
	DefaultExecAPIVersion = "client.authentication.k8s.io/v1"
	// DefaultFenceAfter is long enough for a hub to be restarted or
	// upgraded without stopping any copy.
	DefaultFenceAfter = 10 * time.Minute
	// DefaultReplaceAfter leaves the agents fenceAfter and 5 minutes to
	// stop the copies of a worker the hub cannot reach.
	DefaultReplaceAfter = 15 * time.Minute
	// FencingClockMargin is the least replaceAfter must exceed fenceAfter
	// by: the delay before an agent sees a renewal, the time a stopped
	// copy's pods take to go, and the clocks' drift over fenceAfter.
	FencingClockMargin = time.Minute
)

// LoadAgent reads an AgentConfiguration from path, or returns the defaults
// when path is empty. Unknown fields, a wrong apiVersion/kind and invalid
// values are errors that name the file and the field.
func LoadAgent(path string) (*configv1beta1.AgentConfiguration, error) {
	data, err := read(path)
	if err != nil {
		return nil, err
	}
	return ParseAgent(data, path)
}

// LoadHub reads a HubConfiguration from path, or returns the defaults when
// path is empty.
func LoadHub(path string) (*configv1beta1.HubConfiguration, error) {
	data, err := read(path)
	if err != nil {
		return nil, err
	}
	return ParseHub(data, path)
}

// ParseAgent parses an AgentConfiguration read from source (a file, a
// ConfigMap: named in errors; nil data: the defaults) and sets its
// defaults, as LoadAgent does.
func ParseAgent(data []byte, source string) (*configv1beta1.AgentConfiguration, error) {
	cfg := &configv1beta1.AgentConfiguration{}
	if err := parse(data, source, configv1beta1.AgentConfigurationKind, cfg); err != nil {
		return nil, err
	}
	SetAgentDefaults(cfg)
	if errs := ValidateAgent(cfg); len(errs) > 0 {
		return nil, fmt.Errorf("invalid configuration %s: %w", source, errs.ToAggregate())
	}
	return cfg, nil
}

// ParseHub parses a HubConfiguration read from source and sets its
// defaults, as LoadHub does.
func ParseHub(data []byte, source string) (*configv1beta1.HubConfiguration, error) {
	cfg := &configv1beta1.HubConfiguration{}
	if err := parse(data, source, configv1beta1.HubConfigurationKind, cfg); err != nil {
		return nil, err
	}
	SetHubDefaults(cfg)
	if errs := ValidateHub(cfg); len(errs) > 0 {
		return nil, fmt.Errorf("invalid configuration %s: %w", source, errs.ToAggregate())
	}
	return cfg, nil
}

// read returns the file at path; nil for no path.
func read(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading configuration: %w", err)
	}
	return data, nil
}

// parse decodes data, read from path, into a configuration of kind
// strictly; nil data leaves into as it is.
func parse(data []byte, path, kind string, into any) error {
	if data == nil {
		return nil
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return fmt.Errorf("configuration %s is empty: want apiVersion %s, kind %s", path, configv1beta1.GroupVersion, kind)
	}
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(data, &tm); err != nil {
		return fmt.Errorf("parsing configuration %s: %w", path, err)
	}
	if tm.APIVersion != configv1beta1.GroupVersion.String() || tm.Kind != kind {
		return fmt.Errorf("configuration %s has apiVersion %q, kind %q: want apiVersion %q, kind %q",
			path, tm.APIVersion, tm.Kind, configv1beta1.GroupVersion.String(), kind)
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return fmt.Errorf("parsing configuration %s: %w", path, err)
	}
	strictErrs, err := sigsjson.UnmarshalStrict(js, into)
	if err != nil {
		return fmt.Errorf("parsing configuration %s: %w", path, err)
	}
	if len(strictErrs) > 0 {
		return fmt.Errorf("configuration %s: %w", path, errors.Join(strictErrs...))
	}
	return nil
}

// SetAgentDefaults fills every unset field of cfg.
func SetAgentDefaults(cfg *configv1beta1.AgentConfiguration) {
	cfg.APIVersion = configv1beta1.GroupVersion.String()
	cfg.Kind = configv1beta1.AgentConfigurationKind
	setTASDefaults(&cfg.TopologyAwareScheduling)
	nf := &cfg.NodeFailure
	setDuration(&nf.NotReadyDelay, DefaultNotReadyDelay)
	setDuration(&nf.RecoveryTimeout, DefaultRecoveryTimeout)
	defaultTrue(&nf.ReplaceFailedNodes)
	defaultTrue(&nf.ReplaceOnPodTermination)
	defaultTrue(&nf.ReplaceOnTaints)
	defaultTrue(&nf.FailFast)
	if cfg.Summary.MaxBytes == nil {
		cfg.Summary.MaxBytes = ptr.To[int32](DefaultSummaryMaxBytes)
	}
	setDuration(&cfg.Summary.MinInterval, DefaultSummaryMinInterval)
	setDuration(&cfg.Summary.HeartbeatInterval, DefaultSummaryHeartbeatInterval)
	// Unset: 1s, at least minInterval, and no more than a shorter
	// heartbeat (a configuration valid before the field was added stays
	// valid).
	maxInterval := max(DefaultSummaryMaxInterval, cfg.Summary.MinInterval.Duration)
	if hb := cfg.Summary.HeartbeatInterval.Duration; hb > 0 && maxInterval > hb {
		maxInterval = max(hb, cfg.Summary.MinInterval.Duration)
	}
	setDuration(&cfg.Summary.MaxInterval, maxInterval)
	setDuration(&cfg.Queueing.UngateBatchPeriod, DefaultUngateBatchPeriod)
	setWaitForPodsReadyDefaults(&cfg.WaitForPodsReady)
	if cfg.Fencing.Namespace == "" {
		cfg.Fencing.Namespace = DefaultWorkerNamespace
	}
	setEventsDefaults(&cfg.Events)
	setFairSharingDefaults(cfg.FairSharing)
	setAdmissionFairSharingDefaults(cfg.AdmissionFairSharing)
}

func setAdmissionFairSharingDefaults(afs *configv1beta1.AdmissionFairSharing) {
	if afs != nil {
		setDuration(&afs.UsageSamplingInterval, DefaultUsageSamplingInterval)
	}
}

func setFairSharingDefaults(fs *configv1beta1.FairSharing) {
	if fs != nil && len(fs.PreemptionStrategies) == 0 {
		fs.PreemptionStrategies = []configv1beta1.PreemptionStrategy{configv1beta1.LessThanOrEqualToFinalShare, configv1beta1.LessThanInitialShare}
	}
}

// validStrategies are the accepted fairSharing.preemptionStrategies lists
// (Kueue's).
var validStrategies = [][]configv1beta1.PreemptionStrategy{
	{configv1beta1.LessThanOrEqualToFinalShare},
	{configv1beta1.LessThanInitialShare},
	{configv1beta1.LessThanOrEqualToFinalShare, configv1beta1.LessThanInitialShare},
}

func validateFairSharing(fs *configv1beta1.FairSharing, p *field.Path) field.ErrorList {
	if fs == nil {
		return nil
	}
	for _, ok := range validStrategies {
		if slices.Equal(ok, fs.PreemptionStrategies) {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(p.Child("preemptionStrategies"), fs.PreemptionStrategies, []string{
		"[LessThanOrEqualToFinalShare]", "[LessThanInitialShare]", "[LessThanOrEqualToFinalShare, LessThanInitialShare]"})}
}

func setWaitForPodsReadyDefaults(w *configv1beta1.WaitForPodsReady) {
	defaultTrue(&w.Enable)
	setDuration(&w.Timeout, DefaultPodsReadyTimeout)
	if w.BlockAdmission == nil {
		w.BlockAdmission = ptr.To(false)
	}
	if w.RecoveryTimeout == nil {
		w.RecoveryTimeout = &metav1.Duration{Duration: w.Timeout.Duration}
	}
	rs := &w.RequeuingStrategy
	if rs.Timestamp == "" {
		rs.Timestamp = configv1beta1.EvictionTimestamp
	}
	if rs.BackoffBaseSeconds == nil {
		rs.BackoffBaseSeconds = ptr.To[int32](DefaultRequeuingBackoffBase)
	}
	if rs.BackoffMaxSeconds == nil {
		rs.BackoffMaxSeconds = ptr.To[int32](DefaultRequeuingBackoffMax)
	}
}

func validateWaitForPodsReady(w *configv1beta1.WaitForPodsReady, p *field.Path) field.ErrorList {
	errs := positive(w.Timeout, p.Child("timeout"), false)
	errs = append(errs, positive(w.RecoveryTimeout, p.Child("recoveryTimeout"), true)...)
	rs, rp := &w.RequeuingStrategy, p.Child("requeuingStrategy")
	switch rs.Timestamp {
	case configv1beta1.EvictionTimestamp:
	case configv1beta1.CreationTimestamp:
		errs = append(errs, field.Invalid(rp.Child("timestamp"), rs.Timestamp,
			"not supported: strata-agent queues a requeued workload from its eviction (Eviction, Kueue's default)"))
	default:
		errs = append(errs, field.NotSupported(rp.Child("timestamp"), rs.Timestamp,
			[]configv1beta1.RequeuingTimestamp{configv1beta1.EvictionTimestamp}))
	}
	if n := rs.BackoffLimitCount; n != nil && *n < 0 {
		errs = append(errs, field.Invalid(rp.Child("backoffLimitCount"), *n, "must not be negative"))
	}
	if b := *rs.BackoffBaseSeconds; b < 1 {
		errs = append(errs, field.Invalid(rp.Child("backoffBaseSeconds"), b, "must be at least 1"))
	}
	if m := *rs.BackoffMaxSeconds; m < *rs.BackoffBaseSeconds {
		errs = append(errs, field.Invalid(rp.Child("backoffMaxSeconds"), m, "must be at least backoffBaseSeconds"))
	}
	return errs
}

func setEventsDefaults(e *configv1beta1.Events) {
	if e.Admissions == "" {
		e.Admissions = configv1beta1.AdmissionEventsPerClusterQueue
	}
}

func validateEvents(e *configv1beta1.Events, p *field.Path) field.ErrorList {
	switch e.Admissions {
	case configv1beta1.AdmissionEventsPerClusterQueue, configv1beta1.AdmissionEventsPerWorkload:
		return nil
	}
	return field.ErrorList{field.NotSupported(p.Child("admissions"), e.Admissions,
		[]configv1beta1.AdmissionEvents{configv1beta1.AdmissionEventsPerClusterQueue, configv1beta1.AdmissionEventsPerWorkload})}
}

// SetHubDefaults fills every unset field of cfg.
func SetHubDefaults(cfg *configv1beta1.HubConfiguration) {
	cfg.APIVersion = configv1beta1.GroupVersion.String()
	cfg.Kind = configv1beta1.HubConfigurationKind
	setTASDefaults(&cfg.TopologyAwareScheduling)
	setFairSharingDefaults(cfg.FairSharing)
	setAdmissionFairSharingDefaults(cfg.AdmissionFairSharing)
	setDuration(&cfg.Dispatch.AdmissionTimeout, DefaultAdmissionTimeout)
	setDuration(&cfg.Dispatch.PendingTimeout, DefaultPendingTimeout)
	setDuration(&cfg.Dispatch.SummaryStaleAfter, DefaultSummaryStaleAfter)
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultHubNamespace
	}
	if cfg.Origin == "" {
		cfg.Origin = DefaultOrigin
	}
	setDuration(&cfg.Dispatch.RejectionBackoff, DefaultRejectionBackoff)
	setDuration(&cfg.Dispatch.FinishedRetention, DefaultFinishedRetention)
	setDuration(&cfg.Dispatch.OrphanCheckInterval, DefaultOrphanCheckInterval)
	setDuration(&cfg.Dispatch.SummaryCopyInterval, DefaultSummaryCopyInterval)
	if cfg.Dispatch.PlacementPolicy == "" {
		cfg.Dispatch.PlacementPolicy = configv1beta1.Compact
	}
	if cfg.Dispatch.WorkerNamespace == "" {
		cfg.Dispatch.WorkerNamespace = DefaultWorkerNamespace
	}
	fc := &cfg.Fencing
	if fc.Mode == "" {
		fc.Mode = configv1beta1.FencingEnabled
	}
	setDuration(&fc.FenceAfter, DefaultFenceAfter)
	setDuration(&fc.ReplaceAfter, max(DefaultReplaceAfter, fc.FenceAfter.Duration+5*time.Minute))
	setDuration(&fc.RenewInterval, fc.FenceAfter.Duration/5)
	for i := range cfg.ClusterProfile.AccessProviders {
		if e := cfg.ClusterProfile.AccessProviders[i].ExecConfig; e != nil {
			if e.APIVersion == "" {
				e.APIVersion = DefaultExecAPIVersion
			}
			if e.InteractiveMode == "" {
				e.InteractiveMode = clientcmdapi.NeverExecInteractiveMode
			}
		}
	}
	if cfg.ManagedCluster.ServiceAccountName == "" {
		cfg.ManagedCluster.ServiceAccountName = DefaultManagedServiceAccount
	}
	if cfg.ManagedCluster.ClusterProfileNamespace == "" {
		cfg.ManagedCluster.ClusterProfileNamespace = cfg.Namespace
	}
	setEventsDefaults(&cfg.Events)
}

func setTASDefaults(t *configv1beta1.TopologyAwareScheduling) {
	if t.RequiredAlgorithm == "" {
		t.RequiredAlgorithm = configv1beta1.BestFit
	}
	if t.PreferredAlgorithm == "" {
		t.PreferredAlgorithm = configv1beta1.BestFit
	}
	if t.UnconstrainedAlgorithm == "" {
		t.UnconstrainedAlgorithm = configv1beta1.LeastFreeCapacity
	}
}

func setDuration(d **metav1.Duration, def time.Duration) {
	if *d == nil {
		*d = &metav1.Duration{Duration: def}
	}
}

// defaultTrue sets an unset switch on.
func defaultTrue(b **bool) {
	if *b == nil {
		*b = ptr.To(true)
	}
}

// ValidateAgent checks a defaulted AgentConfiguration.
func ValidateAgent(cfg *configv1beta1.AgentConfiguration) field.ErrorList {
	errs := validateTAS(&cfg.TopologyAwareScheduling, field.NewPath("topologyAwareScheduling"))
	nf := field.NewPath("nodeFailure")
	errs = append(errs, positive(cfg.NodeFailure.NotReadyDelay, nf.Child("notReadyDelay"), true)...)
	errs = append(errs, positive(cfg.NodeFailure.RecoveryTimeout, nf.Child("recoveryTimeout"), false)...)
	sp := field.NewPath("summary")
	if b := *cfg.Summary.MaxBytes; b < 4096 {
		errs = append(errs, field.Invalid(sp.Child("maxBytes"), b, "must be at least 4096 bytes"))
	} else if b > 1536*1024 {
		errs = append(errs, field.Invalid(sp.Child("maxBytes"), b, "must be at most 1572864 bytes (etcd's object size limit)"))
	}
	errs = append(errs, positive(cfg.Summary.MinInterval, sp.Child("minInterval"), true)...)
	if hb := cfg.Summary.HeartbeatInterval.Duration; hb <= 0 {
		errs = append(errs, positive(cfg.Summary.HeartbeatInterval, sp.Child("heartbeatInterval"), false)...)
	} else if hb < cfg.Summary.MinInterval.Duration {
		errs = append(errs, field.Invalid(sp.Child("heartbeatInterval"), hb.String(), "must be at least summary.minInterval"))
	}
	if mx := cfg.Summary.MaxInterval.Duration; mx < cfg.Summary.MinInterval.Duration {
		errs = append(errs, field.Invalid(sp.Child("maxInterval"), mx.String(), "must be at least summary.minInterval"))
	} else if hb := cfg.Summary.HeartbeatInterval.Duration; hb > 0 && mx > hb {
		errs = append(errs, field.Invalid(sp.Child("maxInterval"), mx.String(), "must be at most summary.heartbeatInterval"))
	}
	errs = append(errs, positive(cfg.Queueing.UngateBatchPeriod, field.NewPath("queueing", "ungateBatchPeriod"), true)...)
	for _, msg := range validation.IsDNS1123Label(cfg.Fencing.Namespace) {
		errs = append(errs, field.Invalid(field.NewPath("fencing", "namespace"), cfg.Fencing.Namespace, msg))
	}
	errs = append(errs, validateEvents(&cfg.Events, field.NewPath("events"))...)
	errs = append(errs, validateWaitForPodsReady(&cfg.WaitForPodsReady, field.NewPath("waitForPodsReady"))...)
	errs = append(errs, validateFairSharing(cfg.FairSharing, field.NewPath("fairSharing"))...)
	errs = append(errs, validateAdmissionFairSharing(cfg.AdmissionFairSharing, field.NewPath("admissionFairSharing"))...)
	return errs
}

func validateAdmissionFairSharing(afs *configv1beta1.AdmissionFairSharing, p *field.Path) field.ErrorList {
	if afs == nil {
		return nil
	}
	var errs field.ErrorList
	if afs.UsageHalfLifeTime.Duration < 0 {
		errs = append(errs, field.Invalid(p.Child("usageHalfLifeTime"), afs.UsageHalfLifeTime.Duration.String(), "must not be negative"))
	}
	errs = append(errs, positive(afs.UsageSamplingInterval, p.Child("usageSamplingInterval"), false)...)
	for _, r := range slices.Sorted(maps.Keys(afs.ResourceWeights)) {
		if w := afs.ResourceWeights[r]; w < 0 || math.IsNaN(w) || math.IsInf(w, 0) {
			errs = append(errs, field.Invalid(p.Child("resourceWeights").Key(string(r)), w, "must be a finite number, 0 or more"))
		}
	}
	return errs
}

// ValidateHub checks a defaulted HubConfiguration.
func ValidateHub(cfg *configv1beta1.HubConfiguration) field.ErrorList {
	errs := validateTAS(&cfg.TopologyAwareScheduling, field.NewPath("topologyAwareScheduling"))
	errs = append(errs, validateFairSharing(cfg.FairSharing, field.NewPath("fairSharing"))...)
	errs = append(errs, validateAdmissionFairSharing(cfg.AdmissionFairSharing, field.NewPath("admissionFairSharing"))...)
	dp := field.NewPath("dispatch")
	errs = append(errs, positive(cfg.Dispatch.AdmissionTimeout, dp.Child("admissionTimeout"), false)...)
	errs = append(errs, positive(cfg.Dispatch.PendingTimeout, dp.Child("pendingTimeout"), false)...)
	errs = append(errs, positive(cfg.Dispatch.SummaryStaleAfter, dp.Child("summaryStaleAfter"), false)...)
	errs = append(errs, positive(cfg.Dispatch.RejectionBackoff, dp.Child("rejectionBackoff"), false)...)
	errs = append(errs, positive(cfg.Dispatch.FinishedRetention, dp.Child("finishedRetention"), true)...)
	errs = append(errs, positive(cfg.Dispatch.OrphanCheckInterval, dp.Child("orphanCheckInterval"), false)...)
	errs = append(errs, positive(cfg.Dispatch.SummaryCopyInterval, dp.Child("summaryCopyInterval"), true)...)
	for _, msg := range validation.IsValidLabelValue(cfg.Origin) {
		errs = append(errs, field.Invalid(field.NewPath("origin"), cfg.Origin, msg))
	}
	if p := cfg.Dispatch.PlacementPolicy; p != configv1beta1.Compact && p != configv1beta1.Spread {
		errs = append(errs, field.NotSupported(dp.Child("placementPolicy"), p, []configv1beta1.PlacementPolicy{configv1beta1.Compact, configv1beta1.Spread}))
	}
	errs = append(errs, validateFencing(&cfg.Fencing, field.NewPath("fencing"))...)
	for _, msg := range validation.IsDNS1123Label(cfg.Dispatch.WorkerNamespace) {
		errs = append(errs, field.Invalid(dp.Child("workerNamespace"), cfg.Dispatch.WorkerNamespace, msg))
	}
	errs = append(errs, validateAccessProviders(cfg.ClusterProfile.AccessProviders, field.NewPath("clusterProfile", "accessProviders"))...)
	mc := field.NewPath("managedCluster")
	for _, msg := range validation.IsDNS1123Subdomain(cfg.ManagedCluster.ServiceAccountName) {
		errs = append(errs, field.Invalid(mc.Child("serviceAccountName"), cfg.ManagedCluster.ServiceAccountName, msg))
	}
	for _, msg := range validation.IsDNS1123Label(cfg.ManagedCluster.ClusterProfileNamespace) {
		errs = append(errs, field.Invalid(mc.Child("clusterProfileNamespace"), cfg.ManagedCluster.ClusterProfileNamespace, msg))
	}
	errs = append(errs, validateEvents(&cfg.Events, field.NewPath("events"))...)
	return errs
}

var (
	execAPIVersions = []string{"client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"}
	argsPolicies    = []access.ProfileSourcedCLIArgsPolicy{access.ProfileSourcedCLIArgsPolicyAppend, access.ProfileSourcedCLIArgsPolicyIgnore}
	envPolicies     = []access.ProfileSourcedEnvVarsPolicy{
		access.ProfileSourcedEnvVarsPolicyAppendIfNotExists, access.ProfileSourcedEnvVarsPolicyReplace, access.ProfileSourcedEnvVarsPolicyIgnore,
	}
)

// validateFencing checks that replaceAfter exceeds fenceAfter by the
// margin, and that renewals come often enough for a missed one or two not
// to fence.
func validateFencing(fc *configv1beta1.Fencing, p *field.Path) field.ErrorList {
	if fc.Mode != configv1beta1.FencingEnabled && fc.Mode != configv1beta1.FencingDisabled {
		return field.ErrorList{field.NotSupported(p.Child("mode"), fc.Mode, []configv1beta1.FencingMode{configv1beta1.FencingEnabled, configv1beta1.FencingDisabled})}
	}
	errs := positive(fc.FenceAfter, p.Child("fenceAfter"), false)
	errs = append(errs, positive(fc.ReplaceAfter, p.Child("replaceAfter"), false)...)
	errs = append(errs, positive(fc.RenewInterval, p.Child("renewInterval"), false)...)
	if len(errs) > 0 || fc.Mode == configv1beta1.FencingDisabled {
		return errs
	}
	fence, replace := fc.FenceAfter.Duration, fc.ReplaceAfter.Duration
	if replace < fence+FencingClockMargin {
		errs = append(errs, field.Invalid(p.Child("replaceAfter"), replace.String(), fmt.Sprintf(
			"must be at least fenceAfter (%s) + %s: a copy cut off from the hub must be stopped before the hub places its workload elsewhere", fence, FencingClockMargin)))
	}
	if renew := fc.RenewInterval.Duration; renew*3 > fence {
		errs = append(errs, field.Invalid(p.Child("renewInterval"), renew.String(), fmt.Sprintf("must be at most fenceAfter / 3 (%s)", fence/3)))
	}
	return errs
}

// validateAccessProviders checks that every provider has a unique name and
// a plugin the hub can run without a terminal.
func validateAccessProviders(providers []configv1beta1.AccessProvider, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, ap := range providers {
		pp := p.Index(i)
		switch {
		case ap.Name == "":
			errs = append(errs, field.Required(pp.Child("name"), "the name ClusterProfiles list the provider under"))
		case names.Has(ap.Name):
			errs = append(errs, field.Duplicate(pp.Child("name"), ap.Name))
		}
		names.Insert(ap.Name)
		if ap.ExecConfig == nil {
			errs = append(errs, field.Required(pp.Child("execConfig"), "the credential plugin to run"))
		} else {
			if ap.ExecConfig.Command == "" {
				errs = append(errs, field.Required(pp.Child("execConfig", "command"), ""))
			}
			if !slices.Contains(execAPIVersions, ap.ExecConfig.APIVersion) {
				errs = append(errs, field.NotSupported(pp.Child("execConfig", "apiVersion"), ap.ExecConfig.APIVersion, execAPIVersions))
			}
			if m := ap.ExecConfig.InteractiveMode; m != clientcmdapi.NeverExecInteractiveMode {
				errs = append(errs, field.NotSupported(pp.Child("execConfig", "interactiveMode"), m, []clientcmdapi.ExecInteractiveMode{clientcmdapi.NeverExecInteractiveMode}))
			}
		}
		if v := ap.ProfileSourcedCLIArgsPolicy; v != "" && !slices.Contains(argsPolicies, v) {
			errs = append(errs, field.NotSupported(pp.Child("profileSourcedCLIArgsPolicy"), v, argsPolicies))
		}
		if v := ap.ProfileSourcedEnvVarsPolicy; v != "" && !slices.Contains(envPolicies, v) {
			errs = append(errs, field.NotSupported(pp.Child("profileSourcedEnvVarsPolicy"), v, envPolicies))
		}
	}
	return errs
}

var algorithms = []string{string(configv1beta1.BestFit), string(configv1beta1.LeastFreeCapacity)}

func validateTAS(t *configv1beta1.TopologyAwareScheduling, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, f := range []struct {
		name string
		a    configv1beta1.Algorithm
	}{
		{"requiredAlgorithm", t.RequiredAlgorithm},
		{"preferredAlgorithm", t.PreferredAlgorithm},
		{"unconstrainedAlgorithm", t.UnconstrainedAlgorithm},
	} {
		if f.a != configv1beta1.BestFit && f.a != configv1beta1.LeastFreeCapacity {
			errs = append(errs, field.NotSupported(p.Child(f.name), f.a, algorithms))
		}
	}
	return errs
}

func positive(d *metav1.Duration, p *field.Path, allowZero bool) field.ErrorList {
	switch {
	case d.Duration < 0, d.Duration == 0 && !allowZero:
		return field.ErrorList{field.Invalid(p, d.Duration.String(), "must be a positive duration")}
	}
	return nil
}
