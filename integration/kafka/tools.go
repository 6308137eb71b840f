package kafka

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// ToolOutput is what a Kafka command-line tool printed, stream by stream:
// tools such as DumpLogSegments print their dump to stdout and their
// verdicts (mismatches, gaps) to stderr.
type ToolOutput struct {
	Class          string // the main class that ran, as found in the jars
	Stdout, Stderr string
}

// RunTool runs one of Kafka's command-line tools, named by its class's
// simple name (ToolDumpLogSegments), from the jars of the version under
// test: the class is looked up in them, as tools move between modules
// across release lines. It needs no cluster; the tool logs WARN and above.
func RunTool(tool string, args ...string) (ToolOutput, error) {
	return RunToolInput("", tool, args...)
}

// RunToolInput is RunTool with stdin: what a tool such as the console
// producer reads.
func RunToolInput(stdin string, tool string, args ...string) (ToolOutput, error) {
	version := Version()
	rel, err := parseRelease(version)
	if err != nil {
		return ToolOutput{}, err
	}
	lib, err := EnsureJars(version)
	if err != nil {
		return ToolOutput{}, err
	}
	class, err := findClass(lib, tool)
	if err != nil {
		return ToolOutput{}, err
	}
	dir, err := os.MkdirTemp("", "kafka-tool-")
	if err != nil {
		return ToolOutput{}, fmt.Errorf("creating a dir for %s's log config: %w", class, err)
	}
	defer os.RemoveAll(dir)
	logFlag, err := rel.writeLogConfig(dir, "WARN")
	if err != nil {
		return ToolOutput{}, err
	}
	cmd := exec.Command("java", append([]string{"-Xmx512m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
		logFlag, "-cp", filepath.Join(lib, "*"), class}, args...)...)
	var stdout, stderr strings.Builder
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// A tool that does not end by itself (a console consumer with no
	// limit) must not outlive a test binary killed by its -timeout, which
	// runs no cleanup: the kernel kills the JVM with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err = cmd.Run()
	out := ToolOutput{Class: class, Stdout: stdout.String(), Stderr: stderr.String()}
	if err != nil {
		return out, fmt.Errorf("running %s %s: %v\n%s", class, strings.Join(args, " "), err, tail(out.Stderr, 30))
	}
	return out, nil
}

// ReadSegments concatenates the .log files of a partition directory in
// offset order: its record batches, byte for byte. It reads a broker's log
// dir and kfollower's copy alike, so tests can compare the two.
func ReadSegments(dir string) ([]byte, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return nil, fmt.Errorf("listing segments in %s: %w", dir, err)
	}
	sort.Strings(names) // 20-digit base offsets sort as numbers
	var all []byte
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return nil, fmt.Errorf("reading segment: %w", err)
		}
		all = append(all, b...)
	}
	return all, nil
}
