package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "strata.dev/strata/api/v1beta1"
	"strata.dev/strata/pkg/tas"
	"strata.dev/strata/pkg/workload"
)

// proc returns the handle of a component the suite runs as a process,
// nil when the provider runs it otherwise.
func proc(name string) *process {
	processesMu.Lock()
	defer processesMu.Unlock()
	return processes[name]
}

// admissionWatch samples the admitted Workloads of workers every 500 ms
// until stopped: whether a Workload's admission changed while it stayed
// admitted (admitted twice), and whether the admitted topology assignments
// put more CPU on a node than it has (over-filled).
type admissionWatch struct {
	stopped chan struct{}
	done    chan struct{}

	mu     sync.Mutex
	result admissionReport
	seen   map[types.UID]string
}

// admissionReport is what an admissionWatch counted.
type admissionReport struct {
	samples, readmitted, overfilled int
	worst                           string
}

// watchAdmissions starts sampling the workers' admissions.
func watchAdmissions(ctx SpecContext, workers map[string]client.Client) *admissionWatch {
	w := &admissionWatch{stopped: make(chan struct{}), done: make(chan struct{}), seen: map[types.UID]string{}}
	go func() {
		defer GinkgoRecover()
		defer close(w.done)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stopped:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for name, k := range workers {
				w.sample(ctx, name, k)
			}
		}
	}()
	return w
}

// stop ends the sampling and returns what it counted.
func (w *admissionWatch) stop() admissionReport {
	close(w.stopped)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.result
}

// sample looks at one worker's admitted Workloads once.
func (w *admissionWatch) sample(ctx SpecContext, worker string, k client.Client) {
	var wls strata.WorkloadList
	var nodes corev1.NodeList
	var pods corev1.PodList
	if k.List(ctx, &wls, client.InNamespace(fleetNS)) != nil || k.List(ctx, &nodes) != nil || k.List(ctx, &pods, client.InNamespace(fleetNS)) != nil {
		return // the worker may be restarting: the next sample
	}
	// Succeeded pods per workload, pod set and node: a workload's
	// reclaimable pods (status.reclaimablePods) free their nodes at once,
	// as the agent counts them.
	succeeded := map[string]map[string]int32{}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodSucceeded || p.Spec.NodeName == "" || p.Labels[strata.WorkloadLabel] == "" {
			continue
		}
		key := p.Labels[strata.WorkloadLabel] + "/" + p.Labels[strata.PodSetLabel]
		if succeeded[key] == nil {
			succeeded[key] = map[string]int32{}
		}
		succeeded[key][p.Spec.NodeName]++
	}
	allocatable := map[string]int64{}
	for _, n := range nodes.Items {
		allocatable[n.Name] = n.Status.Allocatable.Cpu().MilliValue()
	}
	assigned := map[string]int64{}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.result.samples++
	for i := range wls.Items {
		wl := &wls.Items[i]
		if wl.Status.Admission == nil || meta.IsStatusConditionTrue(wl.Status.Conditions, strata.WorkloadFinished) {
			continue
		}
		b, _ := json.Marshal(wl.Status.Admission.PodSetAssignments)
		if prev, ok := w.seen[wl.UID]; ok && prev != string(b) {
			w.result.readmitted++
		}
		w.seen[wl.UID] = string(b)
		addAssignedCPU(wl, succeeded, assigned)
	}
	for host, milli := range assigned {
		if have, ok := allocatable[host]; ok && milli > have {
			w.result.overfilled++
			w.result.worst = fmt.Sprintf("%s/%s: %dm assigned, %dm allocatable", worker, host, milli, have)
		}
	}
}

// addAssignedCPU adds, per host, the CPU requests of the pods an admitted
// Workload's topology assignments put there, less its reclaimable pods on
// the hosts where pods of their pod set succeeded (succeeded: by
// "workload/pod set", then host).
func addAssignedCPU(wl *strata.Workload, succeeded map[string]map[string]int32, into map[string]int64) {
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		if psa.TopologyAssignment == nil {
			continue
		}
		a, err := tas.Decode(psa.TopologyAssignment)
		if err != nil {
			continue
		}
		var perPod int64
		for _, ps := range wl.Spec.PodSets {
			if ps.Name == psa.Name {
				for _, c := range ps.Template.Spec.Containers {
					perPod += c.Resources.Requests.Cpu().MilliValue()
				}
			}
		}
		reclaim := workload.Reclaimable(wl, psa.Name)
		done := maps.Clone(succeeded[wl.Name+"/"+psa.Name])
		for _, d := range a.Domains {
			host := d.Values[len(d.Values)-1]
			if take := min(done[host], d.Count, reclaim); take > 0 {
				done[host] -= take
				reclaim -= take
				into[host] -= int64(take) * perPod
			}
			into[host] += int64(d.Count) * perPod
		}
	}
}
