package kafka

import (
	"fmt"
	"os/exec"
	"path/filepath"
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
