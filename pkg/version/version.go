// Package version reports the build's version, set with
// -ldflags "-X strata.dev/strata/pkg/version.Version=...".
package version

import (
	"fmt"
	"runtime"
)

// Version of the build; "dev" when not set at link time.
var Version = "dev"

// String is the version line every binary prints.
func String(binary string) string {
	return fmt.Sprintf("%s %s (%s, %s/%s)", binary, Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
