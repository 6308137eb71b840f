package kafka

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// RunTool runs one of Kafka's command-line tools (a main class such as
// org.apache.kafka.tools.DumpLogSegments) from the resolved jars and returns
// its combined output. It needs no cluster.
func RunTool(mainClass string, args ...string) (string, error) {
	lib, err := EnsureJars(Version())
	if err != nil {
		return "", err
	}
	cmdArgs := append([]string{"-Xmx512m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
		"-Dlog4j2.rootLogger.level=WARN", "-cp", filepath.Join(lib, "*"), mainClass}, args...)
	out, err := exec.Command("java", cmdArgs...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("running %s %s: %v\n%s", mainClass, strings.Join(args, " "), err, tail(string(out), 30))
	}
	return string(out), nil
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
