package dispatch

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// maxPassWrites bounds the writes a pass makes at once. A burst of Jobs is
// placed in one pass; written one after the other, the hub API server's
// write latency (tens of milliseconds when it is busy) would set the pace
// of dispatch.
const maxPassWrites = 16

// errReleaseOnly is a failed record write that needs no retry of its own:
// its reservation is released, and the event that made it fail (a newer
// Workload, or its deletion) brings the next pass.
var errReleaseOnly = errors.New("release only")

// runWrites runs a pass's writes and returns their errors. The pass's
// writes — dispatch records, waiting reasons — go out once the fleet's
// targets are unlocked: the copies controller and the summaries need
// them meanwhile. A record not written undoes its reservation; the quota
// it took in this pass stays taken until the next pass, which its
// failure brings.
func (d *Dispatcher) runWrites(ctx context.Context, writes *passWrites) []error {
	var errs []error
	if len(writes.journalled) > 0 {
		errs = append(errs, d.writeJournal(ctx, writes.journalled))
		writes.journalled = nil
	}
	for _, f := range writes.run() {
		d.fleet.Release(f.cluster, f.flavor, f.key)
		errs = append(errs, f.err)
	}
	return errs
}

// passWrites are a pass's API writes — dispatch records and waiting
// reasons — gathered while the pass holds the fleet's targets and run
// after it let them go (run), at most maxPassWrites at a time: no lock is
// held across an API call.
type passWrites struct {
	writes []passWrite
	// journalled are the pass's dispatches, journalled in one write
	// before the other writes (the dispatcher has a Journal).
	journalled []journalWrite
}

// journalWrite is a dispatch to journal: its reservation, its entry, and
// what follows the journal's write (recorded) or its failure (failed,
// after the reservation is released).
type journalWrite struct {
	cluster, flavor, key string
	entry                JournalEntry
	recorded, failed     func()
}

// journal adds a dispatch to journal.
func (w *passWrites) journal(cluster, flavor, key string, entry JournalEntry, recorded, failed func()) {
	w.journalled = append(w.journalled, journalWrite{cluster: cluster, flavor: flavor, key: key, entry: entry, recorded: recorded, failed: failed})
}

// writeJournal journals the pass's dispatches (one page write): the
// journalled ones are recorded, the others' reservations released.
func (d *Dispatcher) writeJournal(ctx context.Context, ws []journalWrite) error {
	entries := make([]JournalEntry, len(ws))
	for i := range ws {
		entries[i] = ws[i].entry
	}
	failed, err := d.journal.Write(ctx, entries)
	lost := make(map[types.UID]bool, len(failed))
	for _, e := range failed {
		lost[e.UID] = true
	}
	for i := range ws {
		if lost[ws[i].entry.UID] {
			d.fleet.Release(ws[i].cluster, ws[i].flavor, ws[i].key)
			ws[i].failed()
			d.mu.Lock()
			d.burned[ws[i].entry.UID] = max(d.burned[ws[i].entry.UID], ws[i].entry.Generation)
			d.mu.Unlock()
			continue
		}
		ws[i].recorded()
	}
	return err
}

// passWrite is one write; a record's (key set) undoes its reservation
// when it fails.
type passWrite struct {
	cluster, flavor, key string
	fn                   func() error
}

// failedRecord is a write that failed: a record's reservation is to be
// released (key set), and err (nil when there is nothing to report)
// returned.
type failedRecord struct {
	cluster, flavor, key string
	err                  error
}

// record adds fn, the record of the reservation key on cluster and flavor.
func (w *passWrites) record(cluster, flavor, key string, fn func() error) {
	w.writes = append(w.writes, passWrite{cluster: cluster, flavor: flavor, key: key, fn: fn})
}

// do adds fn, a write that undoes nothing when it fails.
func (w *passWrites) do(fn func() error) {
	w.writes = append(w.writes, passWrite{fn: fn})
}

// run runs the writes, records first, and returns those that failed:
// records to release, and errors to report.
func (w *passWrites) run() []failedRecord {
	slices.SortStableFunc(w.writes, func(a, b passWrite) int {
		return cmp.Compare(boolRank(a.key == ""), boolRank(b.key == ""))
	})
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed []failedRecord
		slots  = make(chan struct{}, maxPassWrites)
	)
	for _, pw := range w.writes {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			err := pw.fn()
			if err == nil {
				return
			}
			if errors.Is(err, errReleaseOnly) {
				err = nil
			}
			if pw.key == "" && err == nil {
				return
			}
			mu.Lock()
			failed = append(failed, failedRecord{cluster: pw.cluster, flavor: pw.flavor, key: pw.key, err: err})
			mu.Unlock()
		})
	}
	wg.Wait()
	w.writes = nil
	return failed
}

// boolRank ranks false before true.
func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}
