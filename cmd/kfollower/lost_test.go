package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kfollower/kfollower/audit"
	"github.com/kfollower/kfollower/storage"
)

// The audit subcommands (verify.go, lineage.go, lost.go) without a cluster:
// usage errors exit 2 (audit.ExitError), help exits 0, and lost list reads
// a data dir as a table or JSON.
func TestAuditCommands(t *testing.T) {
	dataDir := t.TempDir()
	l := storage.Lost{Topic: "orders", Partition: 3, FirstOffset: 300, LastOffset: 419, Records: 120, Segment: "00000000000000000300.log"}
	dir := filepath.Join(storage.LostFoundDir(dataDir, l.Topic, l.Partition), "00000000000000000300-00000000000000000420")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(l)
	if err := os.WriteFile(filepath.Join(dir, "lost.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		out  string // in stdout, or in stderr when the code is not 0
	}{
		{[]string{"verify", "--data-dir", dataDir}, audit.ExitError, "--bootstrap-servers is required"},
		{[]string{"verify", "--bogus"}, audit.ExitError, "flag provided but not defined"},
		{[]string{"verify", "--help"}, 0, ""},
		{[]string{"verify", "--bootstrap-servers", "h:1", "--partition", "x"}, audit.ExitError, "not a partition number"},
		{[]string{"lineage", "--bootstrap-servers", "h:1"}, audit.ExitError, "--topic is required"},
		{[]string{"lost"}, audit.ExitError, "Usage"},
		{[]string{"lost", "forget"}, audit.ExitError, "unknown subcommand"},
		{[]string{"lost", "replay", "--bootstrap-servers", "h:1", "--data-dir", dataDir}, audit.ExitError, "--to-topic is required"},
		{[]string{"lost", "list", "--data-dir", dataDir}, 0, "[300..419]"},
		{[]string{"lost", "list", "--data-dir", dataDir, "--topic", "other"}, 0, "no lost+found events"},
		{[]string{"lost", "list", "--data-dir", dataDir, "--json"}, 0, `"firstOffset": 300`},
	} {
		var stdout, stderr bytes.Buffer
		code := dispatch(context.Background(), tc.args, &stdout, &stderr, nil)
		where := stdout.String()
		if tc.code != 0 {
			where = stderr.String()
		}
		if code != tc.code || !strings.Contains(where, tc.out) {
			t.Errorf("kfollower %q: exit %d, want %d with %q in\nstdout: %s\nstderr: %s", tc.args, code, tc.code, tc.out, stdout.String(), stderr.String())
		}
	}
}
