package cmdutil

import (
	"testing"

	clientfeatures "k8s.io/client-go/features"
)

// TestInitialListsFromCache: the environment's choice stands; without
// one, client-go's streaming lists are turned off for the process.
func TestInitialListsFromCache(t *testing.T) {
	gates := clientfeatures.FeatureGates()
	if !gates.Enabled(clientfeatures.WatchListClient) {
		t.Skipf("%s is off already (the environment sets %s?)", clientfeatures.WatchListClient, watchListEnv)
	}
	chosen := func(key string) (string, bool) {
		if key == watchListEnv {
			return "true", true
		}
		return "", false
	}
	if err := InitialListsFromCache(chosen); err != nil {
		t.Fatalf("with %s set: %v", watchListEnv, err)
	}
	if !gates.Enabled(clientfeatures.WatchListClient) {
		t.Fatalf("with %s set in the environment, the gate was changed", watchListEnv)
	}
	unset := func(string) (string, bool) { return "", false }
	if err := InitialListsFromCache(unset); err != nil {
		t.Fatalf("without %s: %v", watchListEnv, err)
	}
	if gates.Enabled(clientfeatures.WatchListClient) {
		t.Fatalf("without %s in the environment, streaming lists are still on", watchListEnv)
	}
}
