// Package replay replays a workload trace over a fleet of clusters in
// simulated time, under several dispatch policies side by side, with the
// TAS engine and the hub's placement (pkg/placement): what a
// topology-aware choice of cluster gains over dispatchers that do not
// make one. It is plain Go, no clients.
package replay

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// Topology request modes of a trace's Jobs.
const (
	Required  = "required"
	Preferred = "preferred"
)

// Job is one Job of a trace: when it arrives, how long it runs once
// started, its pods and GPUs per pod, and its topology request (Mode
// Required or Preferred at Level, or none).
type Job struct {
	Name string
	// Arrival and Duration are in seconds.
	Arrival, Duration float64
	Pods              int32
	GPUsPerPod        int64
	Mode              string
	// Level is a topology level: a node label key, or its short name
	// (tas.LevelName: "rack" for cloud.provider.com/topology-rack).
	Level string
	// Priority is the Job's priority (the optional priority column; 0
	// without it). With Options.Preemption a Job may preempt running Jobs
	// of lower priority.
	Priority int32
}

// GPUs is what the Job holds while it runs.
func (j *Job) GPUs() int64 { return int64(j.Pods) * j.GPUsPerPod }

// csvHeader is the trace format's header line; a trace may add the
// priority column after it (csvHeaderPriority).
var (
	csvHeader         = []string{"name", "arrival_seconds", "duration_seconds", "pods", "gpus_per_pod", "topology"}
	csvHeaderPriority = append(slices.Clip(csvHeader), "priority")
)

// ReadCSV reads a trace: a header line, then one Job per line —
// name, arrival_seconds, duration_seconds, pods, gpus_per_pod, topology
// (none, required:LEVEL or preferred:LEVEL), and, when the header names
// it, priority (an integer, as a WorkloadPriorityClass's value). Lines
// starting with # are comments.
func ReadCSV(r io.Reader) ([]Job, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = -1 // set by the header
	cr.TrimLeadingSpace = true
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("reading the trace's header: %w", err)
	}
	if !slices.Equal(header, csvHeader) && !slices.Equal(header, csvHeaderPriority) {
		return nil, fmt.Errorf("the trace's header is %q; want %q, optionally followed by \",priority\"", strings.Join(header, ","), strings.Join(csvHeader, ","))
	}
	cr.FieldsPerRecord = len(header)
	var jobs []Job
	names := map[string]bool{}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading the trace: %w", err)
		}
		line, _ := cr.FieldPos(0)
		j, err := parseJob(rec)
		if err != nil {
			return nil, fmt.Errorf("trace line %d: %w", line, err)
		}
		if names[j.Name] {
			return nil, fmt.Errorf("trace line %d: Job %q appears twice", line, j.Name)
		}
		names[j.Name] = true
		jobs = append(jobs, j)
	}
	if len(jobs) == 0 {
		return nil, fmt.Errorf("the trace has no Jobs")
	}
	return jobs, nil
}

func parseJob(rec []string) (Job, error) {
	j := Job{Name: rec[0]}
	if j.Name == "" {
		return j, fmt.Errorf("a Job without a name")
	}
	var err error
	number := func(field, s string) float64 {
		if err != nil {
			return 0
		}
		var v float64
		v, err = strconv.ParseFloat(s, 64)
		if err == nil && (v < 0 || math.IsNaN(v) || math.IsInf(v, 0)) {
			err = fmt.Errorf("%s %q: want a number of at least 0", field, s)
		} else if err != nil {
			err = fmt.Errorf("%s %q: not a number", field, s)
		}
		return v
	}
	j.Arrival = number("arrival_seconds", rec[1])
	j.Duration = number("duration_seconds", rec[2])
	pods := number("pods", rec[3])
	gpus := number("gpus_per_pod", rec[4])
	if err != nil {
		return j, err
	}
	if pods < 1 || pods != math.Trunc(pods) || pods > math.MaxInt32 {
		return j, fmt.Errorf("pods %q: want a whole number of at least 1", rec[3])
	}
	if gpus < 1 || gpus != math.Trunc(gpus) || gpus > 1<<20 {
		return j, fmt.Errorf("gpus_per_pod %q: want a whole number of at least 1", rec[4])
	}
	j.Pods, j.GPUsPerPod = int32(pods), int64(gpus)
	switch mode, level, _ := strings.Cut(rec[5], ":"); {
	case rec[5] == "none" || rec[5] == "":
	case (mode == Required || mode == Preferred) && level != "":
		j.Mode, j.Level = mode, level
	default:
		return j, fmt.Errorf("topology %q: want none, required:LEVEL or preferred:LEVEL", rec[5])
	}
	if len(rec) > 6 {
		p, err := strconv.ParseInt(rec[6], 10, 32)
		if err != nil {
			return j, fmt.Errorf("priority %q: want a whole number (int32)", rec[6])
		}
		j.Priority = int32(p)
	}
	return j, nil
}

// WriteCSV writes jobs in the format ReadCSV reads, with the priority
// column when a Job has a priority.
func WriteCSV(w io.Writer, jobs []Job) error {
	cw := csv.NewWriter(w)
	header := csvHeader
	if slices.ContainsFunc(jobs, func(j Job) bool { return j.Priority != 0 }) {
		header = csvHeaderPriority
	}
	if err := cw.Write(header); err != nil {
		return err
	}
	for _, j := range jobs {
		topology := "none"
		if j.Mode != "" {
			topology = j.Mode + ":" + j.Level
		}
		rec := []string{j.Name, strconv.FormatFloat(j.Arrival, 'f', -1, 64), strconv.FormatFloat(j.Duration, 'f', -1, 64),
			strconv.Itoa(int(j.Pods)), strconv.FormatInt(j.GPUsPerPod, 10), topology}
		if len(header) > len(csvHeader) {
			rec = append(rec, strconv.FormatInt(int64(j.Priority), 10))
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// GenerateOptions shape a synthetic trace.
type GenerateOptions struct {
	// Jobs is the number of Jobs.
	Jobs int
	// Seed makes the trace reproducible.
	Seed uint64
	// ArrivalsPerHour is the mean rate of the Poisson arrivals.
	ArrivalsPerHour float64
	// HighPriorityShare is the share of Jobs, drawn at random, of
	// priority HighPriority; the others have priority 0.
	HighPriorityShare float64
}

// HighPriority is the priority Generate gives its high-priority Jobs.
const HighPriority = 100

// weighted draws one of values by weight.
func weighted[T any](rng *rand.Rand, values []T, weights []int) T {
	total := 0
	for _, w := range weights {
		total += w
	}
	n := rng.IntN(total)
	for i, w := range weights {
		if n < w {
			return values[i]
		}
		n -= w
	}
	return values[len(values)-1]
}

// Generate draws a synthetic trace whose mix follows public descriptions
// of GPU cluster workloads (docs/performance.md, "Trace replay", states
// the sources and the assumptions): most Jobs are one pod, a few large
// multi-pod Jobs hold most of the GPU time, durations are heavy-tailed
// (log-normal, median 30 minutes, from 1 minute to 1 day), arrivals are
// Poisson. Multi-pod Jobs use whole 8-GPU hosts mostly, and ask for a rack
// or a block, required or preferred, or nothing; Jobs of more than 16 pods
// (a rack of 16 hosts) a block or nothing.
func Generate(o GenerateOptions) []Job {
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x5eed))
	rate := o.ArrivalsPerHour / 3600
	if rate <= 0 {
		rate = 1.0 / 60
	}
	jobs := make([]Job, o.Jobs)
	t := 0.0
	for i := range jobs {
		t += rng.ExpFloat64() / rate
		j := Job{Name: fmt.Sprintf("job-%05d", i), Arrival: math.Round(t)}
		j.Pods = weighted(rng, []int32{1, 2, 4, 8, 16, 32, 64}, []int{60, 10, 10, 8, 6, 4, 2})
		if j.Pods == 1 {
			j.GPUsPerPod = weighted(rng, []int64{1, 2, 4, 8}, []int{50, 20, 15, 15})
		} else {
			j.GPUsPerPod = weighted(rng, []int64{8, 4}, []int{80, 20})
			topo := weighted(rng, []string{"required:rack", "required:block", "preferred:rack", "preferred:block", "none"}, []int{30, 15, 25, 10, 20})
			if j.Pods > 16 {
				// More than a rack of 16 hosts holds: a block at most.
				topo = weighted(rng, []string{"required:block", "preferred:block", "none"}, []int{45, 35, 20})
			}
			if topo != "none" {
				j.Mode, j.Level, _ = strings.Cut(topo, ":")
			}
		}
		d := math.Exp(math.Log(1800) + 1.5*rng.NormFloat64())
		j.Duration = math.Round(min(max(d, 60), 86400))
		if o.HighPriorityShare > 0 && rng.Float64() < o.HighPriorityShare {
			j.Priority = HighPriority
		}
		jobs[i] = j
	}
	return jobs
}
