package kfollower

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/kfollower/kfollower"

// short names for the third-party packages of the table; a name ending in
// "/..." also covers the packages under it.
var thirdParty = map[string]string{
	"kerr":          "github.com/twmb/franz-go/pkg/kerr",
	"kadm":          "github.com/twmb/franz-go/pkg/kadm",
	"kgo":           "github.com/twmb/franz-go/pkg/kgo",
	"kmsg":          "github.com/twmb/franz-go/pkg/kmsg",
	"client_golang": "github.com/prometheus/client_golang/...",
	"scram":         "github.com/xdg-go/scram",
}

// layer is what one package (or, ending in "/...", a tree of packages) may
// import in its non-test files: "std" for the standard library, a project
// package by its path in the module, a third-party one by its short name;
// "*" for anything. deny names standard packages it may still not import.
// Tests may import what they need.
type layer struct {
	pkg   string
	allow []string
	deny  []string
	// noClock: no non-test file reads the clock; time comes in as an
	// argument.
	noClock bool
	// readOnly: no non-test file writes a file, opens a log for writing or
	// produces to a cluster (see writeCalls).
	readOnly bool
	// testOnly: imported by tests alone, never by another package's
	// non-test files, even one whose layer allows anything.
	testOnly bool
}

// clockCalls read the clock.
var clockCalls = []string{"time.Now(", "time.Since(", "time.Until("}

// writeCalls write: a file, a partition directory (storage.Open recovers
// and appends; storage.OpenReadOnly is the reader), or a cluster (a
// producer, or a client to make one). A package that may not import kmsg
// cannot build any other request that writes.
var writeCalls = []string{"os.Create", "os.WriteFile", "os.OpenFile", "os.Mkdir", "os.Remove", "os.Rename",
	"os.Truncate", "os.Chmod", "os.Chtimes", "os.Link", "os.Symlink", "storage.Open(", "storage.Create",
	"Produce(", "ProduceSync(", "kgo.NewClient(", "ProduceRequest"}

var layers = []layer{
	{pkg: "", allow: []string{"std"}}, // this package: the layout alone
	{pkg: "wire/batch", allow: []string{"std"}},
	{pkg: "storage", allow: []string{"std", "wire/batch"}},
	{pkg: "follower", allow: []string{"std", "kerr"}, noClock: true,
		// Pure: no disk, network, process or randomness of its own.
		deny: []string{"os", "os/...", "net", "net/...", "io/fs", "syscall", "math/rand", "math/rand/v2"}},
	// Principals, credentials and ACLs: nothing of this module.
	{pkg: "authz", allow: []string{"std", "scram"}},
	{pkg: "wire", allow: []string{"std", "kmsg", "kerr", "wire/batch"}},
	{pkg: "wire/server", allow: []string{"std", "kmsg", "kerr", "wire/batch", "authz"},
		// Read-only: no storage (it declares its own Log), no files, no
		// reflection or unsafe to reach past that interface.
		deny: []string{"os", "os/...", "io/fs", "syscall", "reflect", "unsafe"}},
	// Forwards the group APIs upstream for wire/server (a server.Groups).
	{pkg: "groups", allow: []string{"std", "wire/server", "kgo", "kmsg", "kerr"}},
	{pkg: "fetcher", allow: []string{"std", "follower", "storage", "wire", "wire/batch", "kgo", "kmsg", "kerr"}},
	// The fetcher's catalog as the server's and the group forwarder's.
	{pkg: "servecat", allow: []string{"std", "fetcher", "wire/server"}},
	// The tools' requests: reads only.
	{pkg: "cluster", allow: []string{"std", "wire", "wire/batch", "kgo", "kmsg", "kerr"}, readOnly: true},
	// Never writes, by construction: no kmsg (it sends only cluster's and
	// wire's requests), no lostfound, no writing call.
	{pkg: "audit", allow: []string{"std", "storage", "cluster", "wire", "wire/batch", "kgo", "kerr"}, readOnly: true},
	// Writes to a cluster (lost replay); reads its data dir only.
	{pkg: "lostfound", allow: []string{"std", "storage", "cluster", "wire", "kgo", "kmsg", "kerr"}},
	// Reads only, except --scenario failover, which writes to its own scratch topic.
	{pkg: "probe", allow: []string{"std", "cluster", "wire", "wire/batch", "kgo", "kmsg", "kerr", "kadm"}},
	{pkg: "metrics", allow: []string{"std", "client_golang", "fetcher", "follower", "wire", "kmsg", "wire/server", "authz"}},
	{pkg: "cmd/kfollower", allow: []string{"*"}},
	{pkg: "integration/...", allow: []string{"*"}},
	{pkg: "bench/...", allow: []string{"*"}},
	// Test certificates: it fails the test it is given on any error.
	{pkg: "internal/testcert", allow: []string{"std"}, testOnly: true},
}

// listed is what go list says of one package.
type listed struct {
	ImportPath string
	Standard   bool
	Imports    []string
	Dir        string
	GoFiles    []string
}

// matches reports whether path is name, or under name when it ends in "/...".
func matches(name, path string) bool {
	if base, ok := strings.CutSuffix(name, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == name
}

// rel is a project package's path in the module ("" for the root), or ok
// false for any other package.
func rel(path string) (string, bool) {
	if path == module {
		return "", true
	}
	r, ok := strings.CutPrefix(path, module+"/")
	return r, ok
}

func (l layer) allows(imp listed) bool {
	for _, d := range l.deny {
		if imp.Standard && matches(d, imp.ImportPath) {
			return false
		}
	}
	for _, a := range l.allow {
		switch {
		case a == "*", a == "std" && imp.Standard:
			return true
		case thirdParty[a] != "" && matches(thirdParty[a], imp.ImportPath):
			return true
		}
		if r, ok := rel(imp.ImportPath); ok && matches(a, r) {
			return true
		}
	}
	return false
}

func (l layer) String() string {
	s := "allowed: " + strings.Join(l.allow, ", ")
	if len(l.deny) > 0 {
		s += "; denied: " + strings.Join(l.deny, ", ")
	}
	return s
}

// goList lists every package of the module and every package they import.
// A failure fails the test: an import rule that cannot be checked is broken.
func goList(t *testing.T) map[string]listed {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Standard,Imports,Dir,GoFiles", "./...")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]listed{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("reading go list's output: %v", err)
		}
		pkgs[p.ImportPath] = p
	}
	if _, ok := pkgs[module+"/follower"]; !ok {
		t.Fatalf("go list did not list %s/follower: run from the module root", module)
	}
	return pkgs
}

// Every package imports only what its layer allows, every package has a
// layer (a new package must be added to the table), and every layer names
// a package that exists. Run with -v to see each package's allowed list.
func TestLayers(t *testing.T) {
	pkgs := goList(t)
	used := map[string]bool{}
	var paths []string
	for path := range pkgs {
		if _, ok := rel(path); ok {
			paths = append(paths, path)
		}
	}
	slices.Sort(paths)
	for _, path := range paths {
		r, _ := rel(path)
		name := r
		if name == "" {
			name = "(root)"
		}
		t.Run(name, func(t *testing.T) {
			i := slices.IndexFunc(layers, func(l layer) bool { return matches(l.pkg, r) })
			if i < 0 {
				t.Fatalf("package %s has no row in layers_test.go's table: add one with the imports its layer allows", path)
			}
			l := layers[i]
			used[l.pkg] = true
			t.Logf("%s", l)
			for _, imp := range pkgs[path].Imports {
				p, ok := pkgs[imp]
				if !ok {
					t.Fatalf("go list did not describe %s, an import of %s", imp, path)
				}
				if !l.allows(p) {
					t.Errorf("%s imports %s; %s", name, imp, l)
				}
				if r, ok := rel(imp); ok {
					if j := slices.IndexFunc(layers, func(l layer) bool { return matches(l.pkg, r) }); j >= 0 && layers[j].testOnly {
						t.Errorf("%s imports %s in a non-test file; it is for tests alone", name, imp)
					}
				}
			}
			if l.noClock {
				checkNoCalls(t, pkgs[path], clockCalls, "reads the clock; time must come in as an argument")
			}
			if l.readOnly {
				checkNoCalls(t, pkgs[path], writeCalls, "writes; this package only reads")
			}
		})
	}
	for _, l := range layers {
		if !used[l.pkg] {
			t.Errorf("the table names %q, which is no package of the module: remove or rename the row", l.pkg)
		}
	}
}

// checkNoCalls fails for a non-test file of p that holds one of calls.
func checkNoCalls(t *testing.T, p listed, calls []string, why string) {
	t.Helper()
	for _, f := range p.GoFiles {
		fh, err := os.Open(filepath.Join(p.Dir, f))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for n := 1; sc.Scan(); n++ {
			for _, call := range calls {
				if strings.Contains(sc.Text(), call) {
					t.Errorf("%s:%d %s (%s)", f, n, why, call)
				}
			}
		}
		fh.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
}
