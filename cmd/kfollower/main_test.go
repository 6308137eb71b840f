package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/kfollower/kfollower/integration/kafka"
)

// TestMain kills any Kafka JVM a test left and checks for goroutine leaks.
func TestMain(m *testing.M) { kafka.Main(m) }

// binary builds kfollower into the test's temp dir. kafka.Main ends the
// process with os.Exit, so a binary shared across tests would outlive it;
// the build cache makes every build after the first a link only.
func binary(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "kfollower")
	cmd := exec.Command("go", "build", "-o", out, ".")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

// result is how a kfollower process ended.
type result struct {
	code   int
	stdout string
	stderr string
}

// runBinary runs bin with args and extra environment, waits at most d.
func runBinary(t *testing.T, bin string, env []string, d time.Duration, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(cleanEnv(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with a killed test binary
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	code := 0
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running %s %q: %v", bin, args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("kfollower %q did not exit within %v; stderr:\n%s", args, d, stderr.String())
	}
	return result{code, stdout.String(), stderr.String()}
}

// cleanEnv is the test's environment without KFOLLOWER_* variables, which
// would otherwise configure the daemon under test.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if len(kv) >= 10 && kv[:10] == "KFOLLOWER_" {
			continue
		}
		out = append(out, kv)
	}
	return out
}
