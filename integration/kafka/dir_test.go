package kafka

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Under KFOLLOWER_KAFKA_DIR a cluster's nodes live in a new directory of
// their own there, removed with the test; a parent that cannot be used is
// an error naming it.
func TestClusterDir(t *testing.T) {
	parent := t.TempDir()
	t.Setenv(EnvDir, parent)
	var dir string
	t.Run("cluster", func(t *testing.T) {
		d, err := clusterDir(t)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Dir(d) != parent {
			t.Fatalf("cluster dir %s is not in %s", d, parent)
		}
		dir = d
	})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s is still there after its test: %v", dir, err)
	}
	t.Setenv(EnvDir, filepath.Join(parent, "missing"))
	if _, err := clusterDir(t); err == nil || !strings.Contains(err.Error(), EnvDir+"=") {
		t.Fatalf("a missing %s: got %v, want an error naming it", EnvDir, err)
	}
}
