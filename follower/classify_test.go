package follower

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Reaction
	}{
		{nil, Proceed},
		{kerr.FencedLeaderEpoch, Fence},
		{kerr.UnknownLeaderEpoch, Retry},
		{kerr.OffsetOutOfRange, OutOfRange},
		{kerr.NotLeaderForPartition, RefreshAndRetry}, // NOT_LEADER_OR_FOLLOWER
		{kerr.LeaderNotAvailable, RefreshAndRetry},
		{kerr.ReplicaNotAvailable, RefreshAndRetry},
		{kerr.UnknownTopicOrPartition, RefreshAndRetry},
		{kerr.UnknownTopicID, RefreshAndRetry},
		{kerr.InconsistentTopicID, RefreshAndRetry},
		{kerr.KafkaStorageError, RefreshAndRetry},
		{kerr.NetworkException, RefreshAndRetry},
		{kerr.RequestTimedOut, RefreshAndRetry},
		{kerr.CorruptMessage, Retry},
		{kerr.OffsetNotAvailable, Retry},
		{kerr.UnknownServerError, Retry},
		{kerr.TopicAuthorizationFailed, Retry},
		{kerr.OffsetMovedToTieredStorage, Retry},
		// Transport failures: lost connection, timeouts, wrapped or not.
		{io.EOF, RefreshAndRetry},
		{errors.New("dial tcp 10.0.0.1:9092: connect: connection refused"), RefreshAndRetry},
		{fmt.Errorf("fetch: %w", kerr.FencedLeaderEpoch), Fence},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	for code, want := range map[int16]Reaction{0: Proceed, 74: Fence, 75: Retry, 1: OutOfRange, 6: RefreshAndRetry, 3: RefreshAndRetry, 100: RefreshAndRetry, 2: Retry, 56: RefreshAndRetry, 32767: Retry} {
		if got := ClassifyCode(code); got != want {
			t.Errorf("ClassifyCode(%d) = %v, want %v", code, got, want)
		}
	}
}

// TestImports proves the package stays pure: only the standard library and
// kerr (docs/design.md §5).
func TestImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	allowed := map[string]bool{
		"github.com/kfollower/kfollower/follower": true,
		"github.com/twmb/franz-go/pkg/kerr":       true,
	}
	for dep := range strings.FieldsSeq(string(out)) {
		if !allowed[dep] {
			t.Errorf("follower depends on %s; only the standard library and kerr are allowed", dep)
		}
	}
	// No clock: time comes in as an argument.
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(src), "time.Now(") {
			t.Errorf("%s reads the clock", f)
		}
	}
	// Nor the standard library's I/O, network or process packages.
	out, err = exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for imp := range strings.FieldsSeq(string(out)) {
		switch {
		case imp == "os", imp == "net", strings.HasPrefix(imp, "net/"), imp == "os/exec",
			imp == "syscall", imp == "math/rand", imp == "math/rand/v2", imp == "io/fs":
			t.Errorf("follower imports %s", imp)
		}
	}
}
