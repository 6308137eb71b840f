package kafka

import (
	"io"
	"os"
	"slices"
	"strings"
	"testing"
)

// Standalone turns the harness's Fatal into an error from Do and runs the
// cleanups last first on Close, temp dirs included.
func TestStandalone(t *testing.T) {
	s := NewStandalone(t.TempDir(), io.Discard)
	var order []int
	s.Cleanup(func() { order = append(order, 1) })
	s.Cleanup(func() { order = append(order, 2) })
	dir := s.TempDir()
	err := s.Do(func() {
		s.Fatalf("broker %d is gone", 3)
		t.Error("Do ran on after Fatalf")
	})
	if err == nil || !strings.Contains(err.Error(), "broker 3 is gone") || !s.Failed() {
		t.Fatalf("Do: %v, failed %v", err, s.Failed())
	}
	s.Close()
	if !slices.Equal(order, []int{2, 1}) {
		t.Fatalf("cleanups ran in order %v, want [2 1]", order)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("temp dir %s left after Close (%v)", dir, err)
	}
}
