package kafka

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A tool's JVM dies with the test binary that ran it, even when the binary
// is killed outright (a package's -timeout, kill -9) and runs no cleanup.
// The test runs itself as a child that starts a console consumer pointed
// at a closed port (it retries forever), kills the child with SIGKILL once
// its JVM is up, and waits for that JVM to be gone.
func TestToolDiesWithTestBinary(t *testing.T) {
	if os.Getenv("KFOLLOWER_TOOL_ORPHAN") == "1" {
		_, err := RunTool(ToolConsoleConsumer, "--bootstrap-server", "127.0.0.1:1", "--topic", "never")
		t.Fatalf("the console consumer ended: %v", err)
	}
	if _, err := EnsureJars(Version()); err != nil {
		t.Fatalf("resolving the Kafka jars: %v", err)
	}
	child := exec.Command(os.Args[0], "-test.run=^TestToolDiesWithTestBinary$", "-test.count=1")
	child.Env = append(os.Environ(), "KFOLLOWER_TOOL_ORPHAN=1")
	if err := child.Start(); err != nil {
		t.Fatalf("starting the child test binary: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	defer func() {
		_ = child.Process.Kill()
		<-exited
	}()

	var jvm int
	waitFor(t, 3*time.Minute, "the child's console consumer JVM", func() bool {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("the child test binary ended before its tool started: %v", err)
		default:
		}
		jvm = javaChild(child.Process.Pid)
		return jvm != 0
	})
	// Should the kernel not kill it, the test does, not to leave it.
	defer func() { _ = syscall.Kill(jvm, syscall.SIGKILL) }()
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("killing the child: %v", err)
	}
	err := <-exited
	exited <- err
	waitFor(t, time.Minute, "the orphaned JVM "+strconv.Itoa(jvm)+" to die", func() bool { return !alive(jvm) })
}

// javaChild is the pid of a java process whose parent is pid, or 0.
func javaChild(pid int) int {
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, c := range strings.Fields(string(b)) {
			comm, _ := os.ReadFile("/proc/" + c + "/comm")
			if strings.TrimSpace(string(comm)) == "java" {
				n, _ := strconv.Atoi(c)
				return n
			}
		}
	}
	return 0
}

// alive says whether pid runs (a zombie waiting for its reaper does not).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command, which is in parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
