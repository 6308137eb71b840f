package kafka

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// DefaultVersion is the Kafka release the tests run against unless
// KAFKA_VERSION says otherwise.
const DefaultVersion = "4.4.0"

//go:embed pom.xml
var pomXML []byte

// Version is the Kafka version chosen for this run.
func Version() string {
	if v := os.Getenv("KAFKA_VERSION"); v != "" {
		return v
	}
	return DefaultVersion
}

// CacheDir is where resolved jars live: $KFOLLOWER_CACHE, or the user cache
// directory (~/.cache/kfollower), outside the work tree so a clean clone reuses
// them.
func CacheDir() (string, error) {
	if d := os.Getenv("KFOLLOWER_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding a cache directory for the Kafka jars (set KFOLLOWER_CACHE): %w", err)
	}
	return filepath.Join(d, "kfollower"), nil
}

// CheckJava reports, in words a person can act on, whether a Java runtime is
// on PATH.
func CheckJava() error {
	if _, err := exec.LookPath("java"); err != nil {
		return errors.New("java is not on PATH: the integration tests start real Kafka brokers and need Java 17 or later (Debian: apt-get install openjdk-17-jre-headless)")
	}
	return nil
}

// EnsureJars returns a directory holding every jar a broker of the given
// version needs, resolving them with Maven on first use. Concurrent callers
// (go test runs packages in parallel) serialise on a lock file; a finished
// directory carries a marker, so a later run downloads nothing.
func EnsureJars(version string) (string, error) {
	rel, err := parseRelease(version)
	if err != nil {
		return "", err
	}
	if err := CheckJava(); err != nil {
		return "", err
	}
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	lib := filepath.Join(cache, "kafka-"+version, "lib")
	marker := filepath.Join(lib, ".complete")
	if complete(marker, version) {
		return lib, nil
	}
	if err := os.MkdirAll(filepath.Dir(lib), 0o755); err != nil {
		return "", fmt.Errorf("creating the Kafka jar cache %s: %w", filepath.Dir(lib), err)
	}
	release, err := lockFile(filepath.Join(filepath.Dir(lib), ".lock"))
	if err != nil {
		return "", err
	}
	defer release()
	if complete(marker, version) {
		return lib, nil // another process finished while we waited
	}
	if _, err := exec.LookPath("mvn"); err != nil {
		return "", errors.New("mvn is not on PATH: the integration tests resolve the Kafka jars from Maven Central with Maven (Debian: apt-get install maven)")
	}

	// Resolve into a fresh directory and rename it into place, so an
	// interrupted download never looks complete.
	work, err := os.MkdirTemp(filepath.Dir(lib), "resolve-")
	if err != nil {
		return "", fmt.Errorf("creating a resolve directory in %s: %w", filepath.Dir(lib), err)
	}
	defer os.RemoveAll(work)
	pom := filepath.Join(work, "pom.xml")
	if err := os.WriteFile(pom, pomXML, 0o644); err != nil {
		return "", fmt.Errorf("writing %s: %w", pom, err)
	}
	out := filepath.Join(work, "lib")
	args := []string{"-B", "-q", "-f", pom}
	// KFOLLOWER_MVN_FLAGS adds Maven flags, e.g. "-s settings.xml" for a mirror.
	args = append(args, strings.Fields(os.Getenv("KFOLLOWER_MVN_FLAGS"))...)
	args = append(args, "dependency:copy-dependencies",
		"-Dkafka.version="+version,
		"-Dkafka.logging="+rel.mavenLogging(),
		"-DincludeScope=runtime",
		"-DoutputDirectory="+out)
	cmd := exec.Command("mvn", args...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("resolving org.apache.kafka:kafka_2.13:%s from Maven Central with %q failed (%v); is Maven Central reachable?\n%s",
			version, strings.Join(cmd.Args, " "), err, tail(buf.String(), 40))
	}
	if err := checkJars(out, rel); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(out, ".complete"), []byte(markerText(version)), 0o644); err != nil {
		return "", fmt.Errorf("marking %s complete: %w", out, err)
	}
	_ = os.RemoveAll(lib) // a half-finished directory from an older harness
	if err := os.Rename(out, lib); err != nil {
		return "", fmt.Errorf("moving resolved jars to %s: %w", lib, err)
	}
	return lib, nil
}

// markerText is what a complete jar directory's marker holds: the version
// and a digest of the pom that resolved it, so a changed pom.xml resolves
// again instead of reusing a classpath it would no longer produce.
func markerText(version string) string {
	return fmt.Sprintf("%s pom-sha256:%x\n", version, sha256.Sum256(pomXML))
}

func complete(marker, version string) bool {
	b, err := os.ReadFile(marker)
	return err == nil && string(b) == markerText(version)
}

// checkJars asserts what the classpath must hold: the broker, its runtime
// modules, the tools, and exactly one SLF4J 1.x binding, the one of the
// release's logging backend (release.log4j2).
func checkJars(dir string, rel release) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("reading resolved jars in %s: %w", dir, err)
	}
	have := map[string]bool{}
	for _, e := range entries {
		have[e.Name()] = true
	}
	v := rel.version
	for _, want := range []string{"kafka_2.13-" + v + ".jar", "kafka-server-" + v + ".jar", "kafka-raft-" + v + ".jar", "kafka-tools-" + v + ".jar"} {
		if !have[want] {
			return fmt.Errorf("resolved jars in %s lack %s", dir, want)
		}
	}
	var bindings []string
	for name := range have {
		for _, b := range []string{"log4j-slf4j-impl-", "log4j-slf4j2-impl-", "slf4j-reload4j-", "slf4j-log4j12-", "slf4j-simple-", "logback-classic-"} {
			if strings.HasPrefix(name, b) {
				bindings = append(bindings, name)
			}
		}
	}
	slices.Sort(bindings)
	if len(bindings) != 1 || !strings.HasPrefix(bindings[0], rel.slf4jBinding()) {
		return fmt.Errorf("resolved jars in %s hold the SLF4J bindings %v; Kafka %s needs exactly one, %s*.jar (SLF4J 1.x): without it the brokers log nothing, with two SLF4J picks either",
			dir, bindings, v, rel.slf4jBinding())
	}
	return nil
}

func tail(s string, lines int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}

// lockFile takes an exclusive flock on path, waiting for other processes,
// and returns its release. The kernel drops it if the process dies.
func lockFile(path string) (release func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
