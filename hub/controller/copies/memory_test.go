package copies

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

// TestTakenBackShown follows a take-back's note from its record's write
// until the cache shows the Workload unplaced or placed anew.
func TestTakenBackShown(t *testing.T) {
	key := types.NamespacedName{Namespace: "ml", Name: "w"}
	m := newMemory()
	var got []bool
	got = append(got, m.takenBackShown(key, "u/1")) // nothing noted
	m.noteTakenBack(key, "u/1")
	got = append(got, m.takenBackShown(key, "u/1")) // the cache is behind
	got = append(got, m.takenBackShown(key, "u/1")) // still behind
	got = append(got, m.takenBackShown(key, "u/2")) // placed anew: dropped
	got = append(got, m.takenBackShown(key, "u/1")) // gone for good
	m.noteTakenBack(key, "u/2")
	m.untrack(key) // seen unplaced
	got = append(got, m.takenBackShown(key, "u/2"))
	if diff := cmp.Diff([]bool{false, true, true, false, false, false}, got); diff != "" {
		t.Errorf("takenBackShown (-want,+got):\n%s", diff)
	}
}

// TestCreateUnknown: a create whose outcome is unknown is remembered for
// its dispatch until the dispatch is forgotten (revokeStray revokes such
// a dispatch though no copy is found: the create may land later).
func TestCreateUnknown(t *testing.T) {
	m := newMemory()
	m.noteSent("u/1")
	var got []bool
	got = append(got, m.createUnknown("u/1")) // sent, its outcome known
	m.noteUnknownCreate("u/1")
	got = append(got, m.createUnknown("u/1"), m.createUnknown("u/2"))
	m.forgetDispatch("u/1")
	got = append(got, m.createUnknown("u/1"))
	if diff := cmp.Diff([]bool{false, true, false, false}, got); diff != "" {
		t.Errorf("createUnknown (-want,+got):\n%s", diff)
	}
}
