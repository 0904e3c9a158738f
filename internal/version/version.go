// Package version holds the operator's build identity, stamped at link time with
// -ldflags "-X github.com/dolphin-operator/dolphin/internal/version.Version=...".
package version

var (
	// Version is the operator's semantic version (the bundle's CSV version).
	Version = "0.0.0-dev"
	// GitCommit is the commit the binary was built from.
	GitCommit = "unknown"
)
