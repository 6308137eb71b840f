package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is set at build time: -ldflags "-X main.version=v1.2.3". Without
// it the module version from the build info is used.
var version = ""

func init() {
	register(&command{name: "version", summary: "print the version of kfollower, Go and franz-go", run: runVersion})
}

// buildVersions returns kfollower's version and franz-go's.
func buildVersions() (kf, franz string) {
	kf, franz = version, "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if kf == "" {
			kf = bi.Main.Version
		}
		for _, d := range bi.Deps {
			if d.Path == "github.com/twmb/franz-go" {
				franz = d.Version
			}
		}
	}
	if kf == "" || kf == "(devel)" {
		kf = "devel"
	}
	return kf, franz
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		if args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
			fmt.Fprintln(stdout, "Usage: kfollower version\n\nPrints the versions of kfollower, Go and franz-go.\n\nExample:\n  kfollower version")
			return exitOK
		}
		fmt.Fprintf(stderr, "kfollower version: takes no arguments, got %q\n", args)
		return exitUsage
	}
	kf, franz := buildVersions()
	fmt.Fprintf(stdout, "kfollower %s\ngo %s\nfranz-go %s\n", kf, runtime.Version(), franz)
	return exitOK
}
