package kafka

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A random cluster id starts with '-' one time in 64; StorageTool must
// still read it as the id, not as an option (it once failed a CI run).
func TestFormatClusterIDStartingWithDash(t *testing.T) {
	rel, err := parseRelease(Version())
	if err != nil {
		t.Fatal(err)
	}
	lib, err := EnsureJars(Version())
	if err != nil {
		t.Fatal(err)
	}
	ports, err := freePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{ID: 1, controller: true, lib: lib, rel: rel, ControllerPort: ports[0], Dir: t.TempDir()}
	n.config = filepath.Join(n.Dir, "server.properties")
	if err := n.writeConfig(nodeProps(n, fmt.Sprintf("1@127.0.0.1:%d", ports[0]), nil)); err != nil {
		t.Fatal(err)
	}
	const id = "-AbCdEfGhIjKlMnOpQrStA" // 22 characters, 16 bytes of base64url
	if err := n.format(id, nil); err != nil {
		t.Fatalf("formatting with cluster id %q: %v", id, err)
	}
	b, err := os.ReadFile(filepath.Join(n.DataDir(), "meta.properties"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "cluster.id=" + id; !strings.Contains(string(b), want) {
		t.Fatalf("meta.properties lacks %q:\n%s", want, b)
	}
}
