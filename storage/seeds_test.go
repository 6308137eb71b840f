package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// writeSeeds writes fuzz seeds in the `go test fuzz v1` format under
// testdata/fuzz/<target> when KFOLLOWER_WRITE_SEEDS=1.
func writeSeeds(t *testing.T, target string, seeds map[string][]byte) {
	t.Helper()
	if os.Getenv("KFOLLOWER_WRITE_SEEDS") != "1" {
		t.Skip("set KFOLLOWER_WRITE_SEEDS=1 to rewrite testdata/fuzz")
	}
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range seeds {
		data := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
