package follower

import (
	"testing"

	"github.com/cockroachdb/datadriven"
)

func TestStories(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			t.Fatalf("unknown command %q", d.Cmd)
			return ""
		})
	})
}
