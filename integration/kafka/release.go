package kafka

import (
	"archive/zip"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Release lines the harness knows how to run, oldest first. Each differs
// from the next in ways the harness handles explicitly below; the
// differences a kfollower user should know are in docs/kafka-versions.md.
// Patch levels are the latest of each line on Maven Central.
var Releases = []string{"3.9.2", "4.0.2", "4.1.2", "4.2.2", "4.3.1", "4.4.0"}

// release is a Kafka version as far as the harness must tell lines apart.
type release struct {
	major, minor int
	version      string
}

// parseRelease reads "MAJOR.MINOR[.PATCH...]". KRaft without ZooKeeper
// works from 3.3 on, but the harness is only proven on the lines in
// Releases, so anything older than 3.9 is refused rather than half run.
func parseRelease(v string) (release, error) {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return release{}, fmt.Errorf("kafka version %q: want MAJOR.MINOR.PATCH", v)
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return release{}, fmt.Errorf("kafka version %q: want MAJOR.MINOR.PATCH", v)
	}
	r := release{major: major, minor: minor, version: v}
	if r.before(3, 9) {
		return release{}, fmt.Errorf("kafka version %s: the harness runs 3.9 and later (KRaft, see Releases)", v)
	}
	return r, nil
}

func (r release) before(major, minor int) bool {
	return r.major < major || r.major == major && r.minor < minor
}

// log4j2 reports whether the broker logs through log4j2. Kafka 4.0 moved
// from log4j 1 (reload4j, whose SLF4J binding the 3.x kafka_2.13 POM
// brings itself) to log4j2 (KIP-653), whose jars and SLF4J
// binding its POM does not bring, so pom.xml adds them for 4.x only.
func (r release) log4j2() bool { return !r.before(4, 0) }

// mavenLogging is the pom.xml profile switch: -Dkafka.logging=reload4j
// leaves out the log4j2 jars, which beside 3.x's slf4j-reload4j would be a
// second SLF4J binding (SLF4J 1.7 then picks one at random).
func (r release) mavenLogging() string {
	if r.log4j2() {
		return "log4j2"
	}
	return "reload4j"
}

// slf4jBinding is the jar name prefix of the one SLF4J 1.x binding the
// resolved classpath must hold.
func (r release) slf4jBinding() string {
	if r.log4j2() {
		return "log4j-slf4j-impl-" // not log4j-slf4j2-impl: Kafka uses SLF4J 1.7
	}
	return "slf4j-reload4j-"
}

// logConfig returns a log configuration file name and its text for a
// broker (INFO, state changes included) or a tool (WARN only), both to
// stdout, and the JVM flag that points at it.
func (r release) logConfig(dir string, level string) (name, text, flag string) {
	if r.log4j2() {
		name = "log4j2.properties"
		text = strings.ReplaceAll(log4j2Config, "LEVEL", level)
		return name, text, "-Dlog4j2.configurationFile=" + filepath.Join(dir, name)
	}
	name = "log4j.properties"
	text = strings.ReplaceAll(log4j1Config, "LEVEL", level)
	return name, text, "-Dlog4j.configuration=file:" + filepath.Join(dir, name)
}

const log4j2Config = `status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = LEVEL
rootLogger.appenderRef.stdout.ref = STDOUT
logger.statechange.name = state.change.logger
logger.statechange.level = LEVEL
`

// log4j1Config is log4j2Config in log4j 1 syntax, as Kafka 3.x's
// config/log4j.properties writes it.
const log4j1Config = `log4j.rootLogger=LEVEL, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.state.change.logger=LEVEL
`

// Main classes, found by simple name in the resolved jars (findClass).
const (
	classBroker  = "Kafka"       // kafka.Kafka in kafka_2.13, every line
	classStorage = "StorageTool" // kafka.tools.StorageTool in kafka_2.13, every line
	// DumpLogSegments is kafka.tools.DumpLogSegments (Scala, kafka_2.13)
	// up to 4.2 and org.apache.kafka.tools.DumpLogSegments (Java,
	// kafka-tools) from 4.3 on, as bin/kafka-dump-log.sh of each line
	// names it.
	ToolDumpLogSegments = "DumpLogSegments"
	// ConsoleConsumer is kafka.tools.ConsoleConsumer (Scala) on 3.9 and
	// org.apache.kafka.tools.consumer.ConsoleConsumer (Java, kafka-tools)
	// on 4.x, as bin/kafka-console-consumer.sh of each line names it.
	ToolConsoleConsumer = "ConsoleConsumer"
	// ConsoleProducer is kafka.tools.ConsoleProducer (Scala) on 3.9 and
	// org.apache.kafka.tools.ConsoleProducer on 4.x.
	ToolConsoleProducer = "ConsoleProducer"
	// GetOffsetShell is org.apache.kafka.tools.GetOffsetShell on every line.
	ToolGetOffsetShell = "GetOffsetShell"
	// BrokerApiVersionsCommand is kafka.admin.BrokerApiVersionsCommand
	// (Scala) on 3.9 and org.apache.kafka.tools.BrokerApiVersionsCommand on
	// 4.x.
	ToolBrokerAPIVersions = "BrokerApiVersionsCommand"
)

// toolPackages are where Kafka keeps command-line main classes: the Java
// ports first, as they replace the Scala originals when both exist.
// kafka.admin holds 3.9's BrokerApiVersionsCommand (Scala), which 4.0 moved
// to org.apache.kafka.tools.
var toolPackages = []string{"org.apache.kafka.tools", "org.apache.kafka.tools.consumer", "kafka.tools", "kafka.admin", "kafka"}

// classIndex lists the classes of each lib dir's jars, read once.
var classIndex = struct {
	sync.Mutex
	m map[string]map[string]bool // lib dir → "pkg.Class" → true
}{m: map[string]map[string]bool{}}

// findClass returns the fully qualified name of the main class simple (e.g.
// "DumpLogSegments") in lib's jars: the one in the first of toolPackages
// that has it. Looking it up, rather than naming it, keeps one harness
// working on every release line, whichever module a tool moved to.
func findClass(lib, simple string) (string, error) {
	classes, err := jarClasses(lib)
	if err != nil {
		return "", err
	}
	for _, pkg := range toolPackages {
		if name := pkg + "." + simple; classes[name] {
			return name, nil
		}
	}
	return "", fmt.Errorf("no class %s in any of %v in the jars of %s", simple, toolPackages, lib)
}

func jarClasses(lib string) (map[string]bool, error) {
	classIndex.Lock()
	defer classIndex.Unlock()
	if m, ok := classIndex.m[lib]; ok {
		return m, nil
	}
	jars, err := filepath.Glob(filepath.Join(lib, "*.jar"))
	if err != nil {
		return nil, fmt.Errorf("listing jars in %s: %w", lib, err)
	}
	if len(jars) == 0 {
		return nil, fmt.Errorf("no jars in %s", lib)
	}
	slices.Sort(jars)
	m := map[string]bool{}
	for _, j := range jars {
		z, err := zip.OpenReader(j)
		if err != nil {
			return nil, fmt.Errorf("reading jar %s: %w", j, err)
		}
		for _, f := range z.File {
			if n, ok := strings.CutSuffix(f.Name, ".class"); ok && !strings.Contains(n, "$") {
				m[strings.ReplaceAll(n, "/", ".")] = true
			}
		}
		z.Close()
	}
	classIndex.m[lib] = m
	return m, nil
}

// writeLogConfig writes r's log configuration for level into dir and
// returns the JVM flag naming it.
func (r release) writeLogConfig(dir, level string) (string, error) {
	name, text, flag := r.logConfig(dir, level)
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
		return "", fmt.Errorf("writing log config %s: %w", filepath.Join(dir, name), err)
	}
	return flag, nil
}
