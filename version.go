package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// version and revision are stamped by `make build`:
// -ldflags "-X main.version=… -X main.revision=…". A plain `go build` leaves
// them empty, and readBuild takes them from the binary's build information.
var version, revision string

// build says which listgate this binary is.
type build struct {
	Version   string // as stamped, else the module's version, else "dev"
	Revision  string // the VCS commit, else "unknown"
	Modified  bool   // built from a tree with uncommitted changes
	GoVersion string
}

// readBuild reads what the linker stamped, then what the Go toolchain
// recorded: `go build` in a Git checkout records the commit and, since Go
// 1.24, a module version made from it (v0.0.0-…-<commit>+dirty); `go run`
// records neither.
func readBuild() build {
	b := build{Version: version, Revision: revision, GoVersion: runtime.Version()}
	if info, ok := debug.ReadBuildInfo(); ok {
		if b.Version == "" && info.Main.Version != "(devel)" {
			b.Version = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				if b.Revision == "" {
					b.Revision = s.Value
				}
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	if b.Version == "" {
		b.Version = "dev"
	}
	if b.Revision == "" {
		b.Revision = "unknown"
	}
	return b
}

// String is what --version prints.
func (b build) String() string {
	modified := ""
	if b.Modified {
		modified = " (modified)"
	}
	return fmt.Sprintf("listgate %s\nrevision %s%s\ngo       %s %s/%s\n", b.Version, b.Revision, modified, b.GoVersion, runtime.GOOS, runtime.GOARCH)
}

// observeBuild adds listgate_build_info{version,revision,go_version} 1 to
// the metrics, so a dashboard can tell which release each gateway runs.
func observeBuild(mp metric.MeterProvider, b build) error {
	labels := metric.WithAttributeSet(attribute.NewSet(
		attribute.String("version", b.Version),
		attribute.String("revision", b.Revision),
		attribute.String("go_version", b.GoVersion),
	))
	_, err := mp.Meter("github.com/listgate/listgate").Int64ObservableGauge("listgate_build_info",
		metric.WithDescription("Always 1; its labels say which listgate runs: version, VCS revision, Go version."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(1, labels)
			return nil
		}))
	if err != nil {
		return fmt.Errorf("listgate_build_info: %w", err)
	}
	return nil
}
