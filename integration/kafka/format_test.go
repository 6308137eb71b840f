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
	rel, lib := releaseUnderTest(t)
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

// The second cluster of a shape is formatted from the cache the first one
// filled: the same files, byte for byte, in its own directory; another
// shape (another feature level) is formatted afresh; and an entry left
// incomplete is never used.
func TestFormatAllCached(t *testing.T) {
	rel, lib := releaseUnderTest(t)
	cache := t.TempDir()
	node := func() *Node {
		t.Helper()
		ports, err := freePorts(2)
		if err != nil {
			t.Fatal(err)
		}
		n := &Node{ID: 1, broker: true, controller: true, lib: lib, rel: rel, Port: ports[0], ControllerPort: ports[1], Dir: t.TempDir()}
		n.config = filepath.Join(n.Dir, "server.properties")
		if err := n.writeConfig(nodeProps(n, fmt.Sprintf("1@127.0.0.1:%d", ports[1]), nil)); err != nil {
			t.Fatal(err)
		}
		return n
	}
	files := func(n *Node) map[string]string {
		t.Helper()
		got := map[string]string{}
		err := filepath.WalkDir(n.DataDir(), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			rel, _ := filepath.Rel(n.DataDir(), path)
			got[rel] = string(b)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	first := node()
	if err := formatAll(cache, Version(), []*Node{first}, nil); err != nil {
		t.Fatal(err)
	}
	want := files(first)
	if _, ok := want["meta.properties"]; !ok || len(want) < 2 {
		t.Fatalf("StorageTool wrote %v, want meta.properties and the bootstrap snapshot", want)
	}
	entries, _ := filepath.Glob(filepath.Join(cache, "*", "complete"))
	if len(entries) != 1 {
		t.Fatalf("cache entries after the first format: %v, want one", entries)
	}
	second := node()
	if err := formatAll(cache, Version(), []*Node{second}, nil); err != nil {
		t.Fatal(err)
	}
	if got := files(second); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("from the cache: %v, want what the first format wrote: %v", got, want)
	}
	// Another shape is not served from this entry.
	other := node()
	if err := formatAll(cache, Version(), []*Node{other}, []string{"group.version=0"}); err != nil {
		t.Fatal(err)
	}
	if got := files(other); got["meta.properties"] == want["meta.properties"] {
		t.Fatal("a node formatted with other features got the cached meta.properties")
	}
	// An entry without its marker is formatted again and completed.
	for _, m := range entries {
		if err := os.Remove(m); err != nil {
			t.Fatal(err)
		}
	}
	third := node()
	if err := formatAll(cache, Version(), []*Node{third}, nil); err != nil {
		t.Fatal(err)
	}
	if got := files(third); got["meta.properties"] == want["meta.properties"] {
		t.Fatal("an incomplete cache entry was used")
	}
	if _, err := os.Stat(entries[0]); err != nil {
		t.Fatalf("the incomplete entry was not filled again: %v", err)
	}
}

// releaseUnderTest is the release line under test and its resolved jars.
func releaseUnderTest(t *testing.T) (release, string) {
	t.Helper()
	rel, err := parseRelease(Version())
	if err != nil {
		t.Fatal(err)
	}
	lib, err := EnsureJars(Version())
	if err != nil {
		t.Fatal(err)
	}
	return rel, lib
}
