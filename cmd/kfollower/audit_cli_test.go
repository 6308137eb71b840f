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

// The tools' commands (verify.go, lineage.go, lost.go) without a cluster:
// usage errors exit 2 (audit.ExitError) with the message and the usage on
// stderr, help exits 0, and lost list reads a data dir as a table or JSON
// on stdout.
func TestAuditCommands(t *testing.T) {
	dataDir := t.TempDir()
	l := storage.Lost{Topic: "orders", Partition: 3, FirstOffset: 300, LastOffset: 419, Records: 120, Segment: "00000000000000000300.log"}
	dir := filepath.Join(storage.LostFoundDir(dataDir, l.Topic, l.Partition), "00000000000000000300-00000000000000000420")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "lost.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		// stdout and stderr must each hold these, in order; none means the
		// stream must be empty.
		stdout, stderr []string
	}{
		{args: []string{"verify", "--data-dir", dataDir}, code: audit.ExitError, stderr: []string{"--bootstrap-servers is required", "Usage: kfollower verify"}},
		{args: []string{"verify", "--bogus"}, code: audit.ExitError, stderr: []string{"unknown flag --bogus", "Usage: kfollower verify"}},
		{args: []string{"verify", "--data-dirr", dataDir}, code: audit.ExitError, stderr: []string{"unknown flag --data-dirr; did you mean --data-dir?", "Usage: kfollower verify"}},
		{args: []string{"verify", "--help"}, code: 0, stdout: []string{"Usage: kfollower verify", "--bootstrap-servers, --bootstrap-server", "--parallel", "--topic, --topics"}},
		{args: []string{"verify", "--bootstrap-servers", "h:1", "--partition", "x"}, code: audit.ExitError, stderr: []string{`--partition: "x" is not a partition number`, "Usage"}},
		{args: []string{"verify", "extra"}, code: audit.ExitError, stderr: []string{`unexpected arguments ["extra"]`}},
		{args: []string{"lineage", "--bootstrap-servers", "h:1"}, code: audit.ExitError, stderr: []string{"--topic is required", "Usage: kfollower lineage"}},
		{args: []string{"lineage", "--help"}, code: 0, stdout: []string{"Usage: kfollower lineage", "--local", "--topic, --topics", "(required)"}},
		{args: []string{"probe", "--help"}, code: 0, stdout: []string{"Usage: kfollower probe", "--scenario"}},
		{args: []string{"lost", "list", "--help"}, code: 0, stdout: []string{"Usage: kfollower lost list", "--data-dir"}},
		{args: []string{"lost", "replay", "--help"}, code: 0, stdout: []string{"Usage: kfollower lost replay", "--to-topic"}},
		{args: []string{"lost", "list", "--data-dir", filepath.Join(dataDir, "no", "such")}, code: audit.ExitError, stderr: []string{"data dir " + filepath.Join(dataDir, "no", "such") + ": stat", "no such file or directory"}},
		{args: []string{"lost", "list", "--data-dir", dataDir, "--topics", "other", "--json"}, code: 0, stdout: []string{`"events": []`}},
		{args: []string{"lost"}, code: audit.ExitError, stderr: []string{"Usage:", "kfollower lost list", "kfollower lost replay"}},
		{args: []string{"lost", "--help"}, code: 0, stdout: []string{"Usage:", "kfollower lost list"}},
		{args: []string{"lost", "forget"}, code: audit.ExitError, stderr: []string{`unknown subcommand "forget"`, "Usage:"}},
		{args: []string{"lost", "replay", "--bootstrap-servers", "h:1", "--data-dir", dataDir}, code: audit.ExitError, stderr: []string{"--to-topic is required", "Usage: kfollower lost replay"}},
		{args: []string{"lost", "list", "--data-dir", ""}, code: audit.ExitError, stderr: []string{"lost: no data dir", "Usage: kfollower lost list"}},
		{args: []string{"lost", "list", "--data-dir", dataDir}, code: 0, stdout: []string{"orders-3", "[300..419]", dir}},
		{args: []string{"lost", "list", "--data-dir", dataDir, "--topic", "other"}, code: 0, stdout: []string{"no lost+found events"}},
		{args: []string{"lost", "list", "--data-dir", dataDir, "--json"}, code: 0, stdout: []string{`"topic": "orders"`, `"firstOffset": 300`, `"dir": "` + dir + `"`}},
	} {
		var stdout, stderr bytes.Buffer
		code := dispatch(context.Background(), tc.args, &stdout, &stderr, nil)
		if code != tc.code || !holds(stdout.String(), tc.stdout) || !holds(stderr.String(), tc.stderr) {
			t.Errorf("kfollower %q: exit %d, want %d, with %q on stdout and %q on stderr; got\nstdout: %s\nstderr: %s",
				tc.args, code, tc.code, tc.stdout, tc.stderr, stdout.String(), stderr.String())
		}
	}
}

// holds reports whether s holds each of want, in order, or is empty when
// want is.
func holds(s string, want []string) bool {
	if len(want) == 0 {
		return s == ""
	}
	for _, w := range want {
		i := strings.Index(s, w)
		if i < 0 {
			return false
		}
		s = s[i+len(w):]
	}
	return true
}
