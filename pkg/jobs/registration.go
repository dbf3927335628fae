package jobs

import (
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"strata.dev/strata/pkg/tas"
)

// Registration is a kind as its package registers it (pkg/jobs/kinds):
// the kind, and what Strata's binaries need of it beyond Kind and Job.
type Registration struct {
	// Kind is the kind as the hub dispatches it, and as a worker runs it
	// unless it is GroupedWorkloads (a worker then runs the jobs its
	// WorkerJobs are).
	Kind Kind
	// ShortNames name the kind on kubectl strata explain's command line,
	// before the names kubectl gives every kind (see Names): "lws".
	ShortNames []string
	// AddToScheme adds the kind's API group version to a scheme (every
	// binary's, pkg/scheme).
	AddToScheme func(*runtime.Scheme) error
	// AgentController, when set, registers the agent's own controller of
	// the kind's objects with mgr (LeaderWorkerSets, one workload per
	// group); recorder is the agent's. Unset, the agent's job reconciler
	// (agent/controller/jobs) runs them: it suspends and resumes them.
	// opts are the agent's topology settings (its intake's rules).
	AgentController func(mgr manager.Manager, recorder events.EventRecorder, opts tas.Options) error
}

// Names are the names of the kind on kubectl strata explain's command
// line: its short names, then its kind and its resource in lower case,
// as kubectl takes them, each also with its group ("job", "jobs",
// "job.batch", "jobs.batch"). The first is the one its help shows.
func (r Registration) Names() []string {
	gvk := r.Kind.GroupVersionKind()
	kind, resource := strings.ToLower(gvk.Kind), plural(r.Kind)
	return append(append([]string(nil), r.ShortNames...), kind, resource, kind+"."+gvk.Group, resource+"."+gvk.Group)
}

// plural is the kind's resource: its kind in lower case, plural.
func plural(k Kind) string { return strings.ToLower(k.GroupVersionKind().Kind) + "s" }
