package kubectlstrata

import (
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/jobs/kinds"
	"strata.dev/strata/pkg/queue"
	"strata.dev/strata/pkg/summarycopy"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

//go:embed dashboard
var dashboardFiles embed.FS

// WorkloadRowView is one Workload of the dashboard's list: where it is,
// or why it waits.
type WorkloadRowView struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Job is KIND/NAME as explain takes it ("job/train"); empty when the
	// Workload has no owner of a registered kind.
	Job        string `json:"job,omitempty"`
	LocalQueue string `json:"localQueue"`
	Priority   int32  `json:"priority"`
	// State is Admitted, Dispatched (on a hub: sent, not yet admitted by
	// the worker), Finished, Invalid or Pending.
	State   string `json:"state"`
	Cluster string `json:"cluster,omitempty"`
	Flavor  string `json:"flavor,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// Workload states of WorkloadRowView.
const (
	stateAdmitted   = "Admitted"
	stateDispatched = "Dispatched"
	stateFinished   = "Finished"
	stateInvalid    = "Invalid"
	statePending    = "Pending"
	// stateReserved: its quota reserved, its queue's admission checks
	// not all Ready yet (a hub's: not dispatched yet).
	stateReserved = "Reserved"
)

// newWorkloadRows lists wls for the dashboard: waiting ones first (in the
// order a queue serves them: priority, then queue time), then the rest by
// namespace and name.
func newWorkloadRows(wls []strata.Workload) []WorkloadRowView {
	rows := make([]WorkloadRowView, 0, len(wls))
	of := make(map[string]*strata.Workload, len(wls)) // by namespace/name
	for i := range wls {
		wl := &wls[i]
		r := WorkloadRowView{Namespace: wl.Namespace, Name: wl.Name, LocalQueue: wl.Spec.QueueName, Priority: priorityOf(wl), Job: jobOf(wl)}
		c := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadAdmitted)
		if c != nil {
			r.Reason, r.Message = c.Reason, c.Message
		}
		if p := wl.Status.Placement; p != nil {
			r.Cluster, r.Flavor = p.Cluster, p.Flavor
			if len(p.PodSetFlavors) > 0 {
				// Its pod sets placed on different flavors: each once.
				var flavors []string
				for _, f := range p.PodSetFlavors {
					flavors = append(flavors, f.Flavor)
				}
				r.Flavor = joinDistinct(flavors)
			}
		}
		switch {
		case meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished):
			r.State = stateFinished
		case meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadInvalid):
			r.State = stateInvalid
			if ic := meta.FindStatusCondition(wl.Status.Conditions, strata.WorkloadInvalid); ic != nil {
				r.Reason, r.Message = ic.Reason, ic.Message
			}
		case wl.Status.Admission != nil:
			r.State = stateAdmitted
			if workload.AwaitingChecks(wl) {
				r.State = stateReserved
			}
			if r.Flavor == "" {
				// Its pod sets' flavors, each once: a workload's pod sets
				// may be admitted on different flavors.
				var flavors []string
				for _, psa := range wl.Status.Admission.PodSetAssignments {
					flavors = append(flavors, psa.Flavor)
				}
				r.Flavor = joinDistinct(flavors)
			}
		case r.Cluster != "":
			r.State = stateDispatched
		default:
			r.State = statePending
		}
		rows = append(rows, r)
		of[wl.Namespace+"/"+wl.Name] = wl
	}
	order := func(s string) int {
		if s == statePending || s == stateDispatched || s == stateReserved {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(rows, func(a, b WorkloadRowView) int {
		if d := order(a.State) - order(b.State); d != 0 {
			return d
		}
		if order(a.State) == 0 {
			return queue.Compare(of[a.Namespace+"/"+a.Name], of[b.Namespace+"/"+b.Name])
		}
		if d := strings.Compare(a.Namespace, b.Namespace); d != 0 {
			return d
		}
		return strings.Compare(a.Name, b.Name)
	})
	return rows
}

// priorityOf is the Workload's priority (0 when unset).
func priorityOf(wl *strata.Workload) int32 {
	if wl.Spec.Priority != nil {
		return *wl.Spec.Priority
	}
	return 0
}

// jobOf is the Workload's controlling owner as explain takes it
// (KIND/NAME), when it is of a registered kind.
func jobOf(wl *strata.Workload) string {
	ref := metav1.GetControllerOf(wl)
	if ref == nil {
		return ""
	}
	for _, r := range kinds.Registered {
		gvk := r.Kind.GroupVersionKind()
		if gvk.Kind == ref.Kind && strings.HasPrefix(ref.APIVersion, gvk.Group) {
			return r.Names()[0] + "/" + ref.Name
		}
	}
	return ""
}

// dashboard serves the page and the views it draws, read with the user's
// own credentials from the cluster s reaches.
type dashboard struct {
	s      *session
	static http.Handler

	mu          sync.Mutex
	subscribers map[chan struct{}]struct{}
}

func newDashboard(s *session) (*dashboard, error) {
	sub, err := fs.Sub(dashboardFiles, "dashboard")
	if err != nil {
		return nil, err
	}
	return &dashboard{s: s, static: http.FileServer(http.FS(sub)), subscribers: map[chan struct{}]struct{}{}}, nil
}

// handler routes the dashboard's requests. Only requests that name a
// loopback host are served: a page of another site cannot reach the
// user's cluster through it (DNS rebinding).
func (d *dashboard) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/clusters", d.clusters)
	mux.HandleFunc("GET /api/queues", d.queues)
	mux.HandleFunc("GET /api/workloads", d.workloads)
	mux.HandleFunc("GET /api/topology", d.topology)
	mux.HandleFunc("GET /api/explain", d.explain)
	mux.HandleFunc("GET /api/changes", d.changes)
	mux.Handle("GET /", d.static)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackHost(r.Host) {
			http.Error(w, "the dashboard answers only on localhost", http.StatusForbidden)
			return
		}
		if strings.HasPrefix(r.URL.Path, "/api/") && crossSite(r) {
			// A page of another site may not make the user's
			// credentials read the cluster, even blind.
			http.Error(w, "the dashboard's API answers only its own page", http.StatusForbidden)
			return
		}
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-store")
		mux.ServeHTTP(w, r)
	})
}

// crossSite says whether a request comes from a page of another site:
// the browser's Sec-Fetch-Site says so, or an Origin that is not the
// request's own host.
func crossSite(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return true
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		return err != nil || u.Host != r.Host
	}
	return false
}

// loopbackHost says whether a request's Host names this machine.
func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// reply writes v as JSON, or err as a JSON {"error": ...} with status 502
// (the cluster refused or did not answer) or 400.
func reply(w http.ResponseWriter, v any, err error, status int) {
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	_ = json.NewEncoder(w).Encode(v)
}

func (d *dashboard) clusters(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var wcs strata.WorkerClusterList
	if err := d.s.client.List(ctx, &wcs); err != nil {
		reply(w, nil, apiError(err, "WorkerCluster", "workerclusters", d.s.where), http.StatusBadGateway)
		return
	}
	var wls strata.WorkloadList
	if err := d.s.client.List(ctx, &wls); err != nil {
		reply(w, nil, apiError(err, "Workload", "workloads", d.s.where), http.StatusBadGateway)
		return
	}
	reply(w, newClustersView(wcs.Items, wls.Items), nil, 0)
}

// DashboardQueueView is a ClusterQueue on the dashboard: its quota and
// usage, and its pending workloads (queue's view).
type DashboardQueueView struct {
	Quota QueueQuotaView `json:"quota"`
	// LocalQueues are the LocalQueues that point at the ClusterQueue.
	LocalQueues []LocalQueueRowView `json:"localQueues"`
	QueueView
}

// LocalQueueRowView is one LocalQueue with its counts, as its status
// reports them.
type LocalQueueRowView struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Pending   int32  `json:"pending"`
	Admitted  int32  `json:"admitted"`
	// Problem is the message of its Active condition when that is False
	// (its ClusterQueue missing, or stopped).
	Problem string `json:"problem,omitempty"`
}

// newLocalQueueRows lists, per ClusterQueue, the LocalQueues that point
// at it, sorted by namespace and name.
func newLocalQueueRows(lqs []strata.LocalQueue) map[string][]LocalQueueRowView {
	out := map[string][]LocalQueueRowView{}
	for i := range lqs {
		lq := &lqs[i]
		row := LocalQueueRowView{Namespace: lq.Namespace, Name: lq.Name, Pending: lq.Status.PendingWorkloads, Admitted: lq.Status.AdmittedWorkloads}
		if c := meta.FindStatusCondition(lq.Status.Conditions, strata.LocalQueueActive); c != nil && c.Status == metav1.ConditionFalse {
			row.Problem = c.Message
		}
		out[lq.Spec.ClusterQueue] = append(out[lq.Spec.ClusterQueue], row)
	}
	for _, rows := range out {
		slices.SortFunc(rows, func(a, b LocalQueueRowView) int {
			return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
		})
	}
	return out
}

// QueueQuotaView is a ClusterQueue's quota against its usage, per flavor
// and resource, as its status reports them.
type QueueQuotaView struct {
	ClusterQueue string `json:"clusterQueue"`
	Cohort       string `json:"cohort,omitempty"`
	Admitted     int32  `json:"admitted"`
	Pending      int32  `json:"pending"`
	// Resources are in the order of the queue's flavors, then resources.
	Resources []QuotaRowView `json:"resources"`
}

// QuotaRowView is one flavor's quota of one resource and its use.
type QuotaRowView struct {
	Flavor   string              `json:"flavor"`
	Resource corev1.ResourceName `json:"resource"`
	Nominal  resource.Quantity   `json:"nominal"`
	// BorrowingLimit and LendingLimit are unset when the queue sets none.
	BorrowingLimit *resource.Quantity `json:"borrowingLimit,omitempty"`
	LendingLimit   *resource.Quantity `json:"lendingLimit,omitempty"`
	// Used is what admitted workloads hold, Borrowed the part of it above
	// the nominal quota, Lent what the cohort uses of this queue's quota.
	Used     resource.Quantity `json:"used"`
	Borrowed resource.Quantity `json:"borrowed"`
	Lent     resource.Quantity `json:"lent"`
}

// newQueueQuota builds a ClusterQueue's quota view from its spec and
// status.
func newQueueQuota(cq *strata.ClusterQueue) QueueQuotaView {
	v := QueueQuotaView{ClusterQueue: cq.Name, Cohort: cq.Spec.Cohort, Admitted: cq.Status.AdmittedWorkloads, Pending: cq.Status.PendingWorkloads,
		Resources: []QuotaRowView{}}
	reserved := map[string]map[corev1.ResourceName]strata.ResourceReservation{}
	for _, f := range cq.Status.FlavorsReservation {
		m := map[corev1.ResourceName]strata.ResourceReservation{}
		for _, r := range f.Resources {
			m[r.Name] = r
		}
		reserved[f.Name] = m
	}
	for _, f := range queue.Flavors(cq) {
		for _, q := range f.Resources {
			row := QuotaRowView{Flavor: f.Name, Resource: q.Name, Nominal: q.NominalQuota, BorrowingLimit: q.BorrowingLimit, LendingLimit: q.LendingLimit}
			if r, ok := reserved[f.Name][q.Name]; ok {
				row.Used, row.Borrowed, row.Lent = r.Total, r.Borrowed, r.Lent
			}
			v.Resources = append(v.Resources, row)
		}
	}
	return v
}

func (d *dashboard) queues(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var cqs strata.ClusterQueueList
	if err := d.s.client.List(ctx, &cqs); err != nil {
		reply(w, nil, apiError(err, "ClusterQueue", "clusterqueues", d.s.where), http.StatusBadGateway)
		return
	}
	var lqs strata.LocalQueueList
	if err := d.s.client.List(ctx, &lqs); err != nil {
		reply(w, nil, apiError(err, "LocalQueue", "localqueues", d.s.where), http.StatusBadGateway)
		return
	}
	locals := newLocalQueueRows(lqs.Items)
	views := make([]DashboardQueueView, 0, len(cqs.Items))
	for i := range cqs.Items {
		v, err := readQueue(ctx, d.s, cqs.Items[i].Name, nil)
		if err != nil {
			reply(w, nil, err, http.StatusBadGateway)
			return
		}
		views = append(views, DashboardQueueView{Quota: newQueueQuota(&cqs.Items[i]), LocalQueues: append([]LocalQueueRowView{}, locals[cqs.Items[i].Name]...), QueueView: v})
	}
	reply(w, views, nil, 0)
}

func (d *dashboard) workloads(w http.ResponseWriter, r *http.Request) {
	var wls strata.WorkloadList
	if err := d.s.client.List(r.Context(), &wls); err != nil {
		reply(w, nil, apiError(err, "Workload", "workloads", d.s.where), http.StatusBadGateway)
		return
	}
	reply(w, newWorkloadRows(wls.Items), nil, 0)
}

func (d *dashboard) topology(w http.ResponseWriter, r *http.Request) {
	cluster := r.URL.Query().Get("cluster")
	if cluster == "" {
		reply(w, nil, errors.New("name a worker: ?cluster=NAME"), http.StatusBadRequest)
		return
	}
	// The hub's copies of the worker's summaries: the dashboard reads the
	// hub alone, with no credential for any worker.
	var list strata.CapacitySummaryList
	if err := d.s.client.List(r.Context(), &list, client.MatchingLabelsSelector{Selector: summarycopy.Of(cluster)}); err != nil {
		reply(w, nil, apiError(err, "CapacitySummary", "capacitysummaries", d.s.where), http.StatusBadGateway)
		return
	}
	v := newTopologyView(list.Items)
	if len(list.Items) == 0 {
		v.Problem = fmt.Sprintf(noCopies, cluster)
	}
	reply(w, v, nil, 0)
}

func (d *dashboard) explain(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	kind, name, err := parseJobArg(q.Get("job"))
	if err == nil && (name == "" || q.Get("namespace") == "") {
		err = errors.New("name a job: ?namespace=NS&job=KIND/NAME")
	}
	if err != nil {
		reply(w, nil, err, http.StatusBadRequest)
		return
	}
	s := *d.s
	s.namespace = q.Get("namespace")
	v, err := explainOne(r.Context(), &s, kind, name)
	if err != nil {
		reply(w, nil, err, http.StatusBadGateway)
		return
	}
	out := DashboardExplainView{Explain: v, Domains: []string{}, Events: []EventView{}}
	// The events of these objects, not of earlier ones of the same names.
	objects := map[string]types.UID{kind.GroupVersionKind().Kind + "/" + name: "", "Workload/" + kind.WorkloadName(name): ""}
	var wl strata.Workload
	if err := s.client.Get(r.Context(), client.ObjectKey{Namespace: s.namespace, Name: kind.WorkloadName(name)}, &wl); err == nil {
		out.Domains = placedDomains(&wl)
		objects["Workload/"+wl.Name] = wl.UID
	}
	if job, err := getJob(r.Context(), &s, kind, name); err == nil {
		objects[kind.GroupVersionKind().Kind+"/"+name] = job.GetUID()
	}
	var evs eventsv1.EventList
	if err := s.client.List(r.Context(), &evs, client.InNamespace(s.namespace)); err == nil {
		out.Events = eventsOf(evs.Items, objects)
	}
	reply(w, out, nil, 0)
}

// EventView is one event about a workload or its job.
type EventView struct {
	Time   metav1.Time `json:"time"`
	Type   string      `json:"type"`
	Reason string      `json:"reason"`
	// Object is KIND/NAME of what the event is about.
	Object string `json:"object"`
	Note   string `json:"note"`
	Count  int32  `json:"count,omitempty"`
}

// maxEvents is how many events the dashboard shows of a workload.
const maxEvents = 20

// eventsOf returns the events regarding the objects ("KIND/NAME" → its
// UID, "" when not known: any object of that name), the latest first, at
// most maxEvents.
func eventsOf(evs []eventsv1.Event, objects map[string]types.UID) []EventView {
	out := []EventView{}
	for _, e := range evs {
		obj := e.Regarding.Kind + "/" + e.Regarding.Name
		uid, ok := objects[obj]
		if !ok || uid != "" && e.Regarding.UID != "" && e.Regarding.UID != uid {
			continue
		}
		v := EventView{Time: metav1.Time{Time: e.EventTime.Time}, Type: e.Type, Reason: e.Reason, Object: obj, Note: e.Note}
		if e.Series != nil {
			v.Count = e.Series.Count
			v.Time = metav1.Time{Time: e.Series.LastObservedTime.Time}
		} else if e.DeprecatedCount > 1 {
			v.Count = e.DeprecatedCount // a core/v1 event's repeats
		}
		if v.Time.IsZero() {
			v.Time = e.DeprecatedLastTimestamp
		}
		out = append(out, v)
	}
	slices.SortStableFunc(out, func(a, b EventView) int { return b.Time.Compare(a.Time.Time) })
	if len(out) > maxEvents {
		out = out[:maxEvents]
	}
	return out
}

// DashboardExplainView is explain's view of a workload and the domains
// its pods are placed in, for the heatmap to highlight.
type DashboardExplainView struct {
	Explain ExplainView `json:"explain"`
	// Events are the latest events about the workload and its job.
	Events []EventView `json:"events"`
	// Domains are "LEVEL=VALUE" for every domain, at every level, that
	// holds pods of the workload: from the worker's admission and, on a
	// hub, from the plan the hub dispatched it with (its topology hint,
	// which names the summary's levels, racks and blocks, where an
	// admission may name hosts only).
	Domains []string `json:"domains"`
}

// placedDomains lists the domains of wl's admission and topology hint.
func placedDomains(wl *strata.Workload) []string {
	set := map[string]bool{}
	add := func(a *tas.Assignment) {
		for _, d := range a.Domains {
			pairs := make([]string, 0, len(d.Values))
			for i, v := range d.Values {
				if i < len(a.Levels) {
					pairs = append(pairs, a.Levels[i]+"="+v)
				}
			}
			set[strings.Join(pairs, ",")] = true
		}
	}
	if wl.Status.Admission != nil {
		for _, psa := range wl.Status.Admission.PodSetAssignments {
			if a, err := tas.Decode(psa.TopologyAssignment); err == nil {
				add(a)
			}
		}
	}
	if p := wl.Status.Placement; p != nil && p.TopologyHint != "" {
		if hints, err := workload.DecodeHints(p.TopologyHint); err == nil {
			for _, a := range hints {
				add(a)
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// changes is a stream of server-sent events, one "change" event (at most
// every half second) whenever a watched object of the cluster changes:
// the page then reads the views again.
func (d *dashboard) changes(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	ch := make(chan struct{}, 1)
	d.mu.Lock()
	d.subscribers[ch] = struct{}{}
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.subscribers, ch)
		d.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprint(w, "retry: 2000\n\n")
	flusher.Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-ch:
			fmt.Fprint(w, "event: change\ndata: {}\n\n")
			flusher.Flush()
			select { // at most every half second
			case <-r.Context().Done():
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
}

// notify tells every open page that something changed.
func (d *dashboard) notify() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for ch := range d.subscribers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// watch follows the hub's objects the views are made of until ctx ends,
// watching each list again when its watch closes.
func (d *dashboard) watch(ctx context.Context, wc client.WithWatch) {
	type watched struct {
		list client.ObjectList
		opts []client.ListOption
	}
	copies, err := labels.Parse(strata.WorkerClusterLabel)
	if err != nil {
		panic(err) // a constant key
	}
	lists := []watched{
		{list: &strata.WorkerClusterList{}}, {list: &strata.WorkloadList{}}, {list: &strata.ClusterQueueList{}}, {list: &strata.LocalQueueList{}},
		// The hub's copies of the workers' summaries (the heatmaps).
		{list: &strata.CapacitySummaryList{}, opts: []client.ListOption{client.MatchingLabelsSelector{Selector: copies}}},
	}
	for _, l := range lists {
		go func() {
			for ctx.Err() == nil {
				wi, err := wc.Watch(ctx, l.list, l.opts...)
				if err == nil {
					for ev := range wi.ResultChan() {
						if ev.Type != watch.Bookmark {
							d.notify()
						}
					}
					wi.Stop()
				}
				select {
				case <-ctx.Done():
				case <-time.After(2 * time.Second):
				}
			}
		}()
	}
}

func newDashboardCommand() *cobra.Command {
	var (
		f       liveFlags
		address string
	)
	cmd := &cobra.Command{
		Use:   "dashboard [--address 127.0.0.1:8001] [--kubeconfig HUB] [--context CTX]",
		Short: "Serve a dashboard of the fleet on localhost: workers, topology, queues and workloads, live",
		Long: `dashboard serves a web page on this machine that shows what the other
commands print, and follows it live: the worker clusters with their
connection, fencing, summaries and copies (clusters); each worker's
topology as a heatmap of free capacity (topology --cluster); the
ClusterQueues' pending workloads in order with why they wait (queue);
and for a workload, where each pod set landed, highlighted on its
worker's heatmap, or why it waits (explain).

It reads the cluster with your kubeconfig and your permissions, as
kubectl does, and watches it to update the page: nothing runs in the
cluster and no credential is made. It listens on the loopback address
only, prints the URL and opens nothing.`,
		Example: `  kubectl strata dashboard --context hub
  kubectl strata dashboard --address 127.0.0.1:9000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := f.connect()
			if err != nil {
				return err
			}
			host, _, err := net.SplitHostPort(address)
			if err != nil || !loopbackHost(host) {
				return fmt.Errorf("--address %q: give a loopback address and port, such as 127.0.0.1:8001", address)
			}
			d, err := newDashboard(s)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", address)
			if err != nil {
				return fmt.Errorf("listening on %s: %w", address, err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if wc, ok := s.client.(client.WithWatch); ok {
				d.watch(ctx, wc)
			}
			srv := &http.Server{Handler: d.handler(), ReadHeaderTimeout: 10 * time.Second}
			go func() {
				<-ctx.Done()
				_ = srv.Close()
			}()
			fmt.Fprintf(cmd.OutOrStdout(), "The dashboard of %s: http://%s/ (Ctrl-C stops it)\n", s.where, ln.Addr())
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	f.add(cmd, false)
	_ = cmd.Flags().MarkHidden("output")
	cmd.Flags().StringVar(&address, "address", "127.0.0.1:8001", "the loopback address and port to serve on (port 0 picks one)")
	return cmd
}

// joinDistinct joins names, each once, in the order first seen.
func joinDistinct(names []string) string {
	var out []string
	for _, n := range names {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return strings.Join(out, ", ")
}
