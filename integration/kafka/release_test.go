package kafka

import (
	"archive/zip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeJar writes a jar (a zip) holding empty entries of the given names.
func writeJar(t *testing.T, path string, entries ...string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	z := zip.NewWriter(f)
	for _, e := range entries {
		if _, err := z.Create(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// Each tool is found where its release line keeps it: DumpLogSegments in
// the Scala core jar up to 4.2, in kafka-tools from 4.3, the Java port
// first when a classpath holds both; a missing tool is an error naming it.
func TestFindClass(t *testing.T) {
	core := []string{"kafka/Kafka.class", "kafka/tools/StorageTool.class", "kafka/tools/StorageTool$.class"}
	for _, tc := range []struct {
		name  string
		jars  map[string][]string
		tool  string
		want  string
		error string
	}{
		{name: "4.0: Scala DumpLogSegments in kafka_2.13",
			jars: map[string][]string{
				"kafka_2.13-4.0.2.jar":  append(core, "kafka/tools/DumpLogSegments.class", "kafka/tools/DumpLogSegments$.class"),
				"kafka-tools-4.0.2.jar": {"org/apache/kafka/tools/LeaderElectionCommand.class"},
			},
			tool: ToolDumpLogSegments, want: "kafka.tools.DumpLogSegments"},
		{name: "4.4: Java DumpLogSegments in kafka-tools",
			jars: map[string][]string{
				"kafka_2.13-4.4.0.jar":  core,
				"kafka-tools-4.4.0.jar": {"org/apache/kafka/tools/DumpLogSegments.class", "org/apache/kafka/tools/DumpLogSegments$DumpLogSegmentsOptions.class"},
			},
			tool: ToolDumpLogSegments, want: "org.apache.kafka.tools.DumpLogSegments"},
		{name: "both: the Java port wins",
			jars: map[string][]string{
				"a.jar": {"kafka/tools/DumpLogSegments.class"},
				"b.jar": {"org/apache/kafka/tools/DumpLogSegments.class"},
			},
			tool: ToolDumpLogSegments, want: "org.apache.kafka.tools.DumpLogSegments"},
		{name: "broker main class",
			jars: map[string][]string{"kafka_2.13-3.9.2.jar": core}, tool: classBroker, want: "kafka.Kafka"},
		{name: "storage tool",
			jars: map[string][]string{"kafka_2.13-3.9.2.jar": core}, tool: classStorage, want: "kafka.tools.StorageTool"},
		{name: "an inner class is no main class",
			jars: map[string][]string{"x.jar": {"kafka/tools/Outer$DumpLogSegments.class"}}, tool: ToolDumpLogSegments, error: "no class DumpLogSegments"},
		{name: "missing",
			jars: map[string][]string{"kafka_2.13-4.4.0.jar": core}, tool: ToolDumpLogSegments, error: "no class DumpLogSegments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lib := t.TempDir()
			for name, entries := range tc.jars {
				writeJar(t, filepath.Join(lib, name), entries...)
			}
			got, err := findClass(lib, tc.tool)
			if tc.error != "" {
				if err == nil || !strings.Contains(err.Error(), tc.error) || !strings.Contains(err.Error(), lib) {
					t.Fatalf("findClass(%s) = %q, %v; want an error with %q naming %s", tc.tool, got, err, tc.error, lib)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("findClass(%s) = %q, %v; want %q", tc.tool, got, err, tc.want)
			}
		})
	}
}

// The same lookup in the jars Maven resolved for the version under test.
func TestFindClassInResolvedJars(t *testing.T) {
	rel, lib := releaseUnderTest(t)
	want := map[string]string{classBroker: "kafka.Kafka", classStorage: "kafka.tools.StorageTool",
		ToolDumpLogSegments: "org.apache.kafka.tools.DumpLogSegments"}
	if rel.before(4, 3) {
		want[ToolDumpLogSegments] = "kafka.tools.DumpLogSegments"
	}
	want[ToolGetOffsetShell] = "org.apache.kafka.tools.GetOffsetShell"
	want[ToolConsoleProducer] = "org.apache.kafka.tools.ConsoleProducer"
	want[ToolBrokerAPIVersions] = "org.apache.kafka.tools.BrokerApiVersionsCommand"
	if rel.before(4, 0) {
		want[ToolConsoleProducer] = "kafka.tools.ConsoleProducer"
		want[ToolBrokerAPIVersions] = "kafka.admin.BrokerApiVersionsCommand"
	}
	for tool, w := range want {
		if got, err := findClass(lib, tool); err != nil || got != w {
			t.Errorf("Kafka %s: findClass(%s) = %q, %v; want %q", Version(), tool, got, err, w)
		}
	}
}

func TestParseRelease(t *testing.T) {
	for v, want := range map[string]release{
		"3.9.2": {3, 9, "3.9.2"}, "4.0.2": {4, 0, "4.0.2"}, "4.4.0": {4, 4, "4.4.0"}, "4.10.1-rc1": {4, 10, "4.10.1-rc1"},
	} {
		if got, err := parseRelease(v); err != nil || got != want {
			t.Errorf("parseRelease(%q) = %+v, %v; want %+v", v, got, err, want)
		}
	}
	for _, v := range []string{"", "4", "four.0", "3.8.1", "2.8.0"} {
		if r, err := parseRelease(v); err == nil {
			t.Errorf("parseRelease(%q) = %+v, want an error", v, r)
		}
	}
	for _, v := range Releases {
		if _, err := parseRelease(v); err != nil {
			t.Errorf("Releases lists %s: %v", v, err)
		}
	}
}

// Exactly one SLF4J binding, the one of the release's logging backend.
func TestCheckJarsBinding(t *testing.T) {
	base := func(v string) []string {
		return []string{"kafka_2.13-" + v + ".jar", "kafka-server-" + v + ".jar", "kafka-raft-" + v + ".jar", "kafka-tools-" + v + ".jar", "slf4j-api-1.7.36.jar"}
	}
	for _, tc := range []struct {
		version string
		extra   []string
		ok      bool
	}{
		{"4.4.0", []string{"log4j-slf4j-impl-2.25.3.jar", "log4j-core-2.25.3.jar"}, true},
		{"4.4.0", nil, false}, // the broker would log nothing
		{"4.4.0", []string{"log4j-slf4j2-impl-2.25.3.jar"}, false}, // SLF4J 2 binding, Kafka has 1.7
		{"3.9.2", []string{"slf4j-reload4j-1.7.36.jar", "reload4j-1.2.25.jar"}, true},
		{"3.9.2", []string{"slf4j-reload4j-1.7.36.jar", "log4j-slf4j-impl-2.25.3.jar"}, false}, // two bindings
		{"3.9.2", []string{"log4j-slf4j-impl-2.25.3.jar"}, false},
	} {
		dir := t.TempDir()
		for _, name := range append(base(tc.version), tc.extra...) {
			if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		rel, err := parseRelease(tc.version)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkJars(dir, rel); (err == nil) != tc.ok {
			t.Errorf("%s with %v: checkJars = %v, want ok %v", tc.version, tc.extra, err, tc.ok)
		}
	}
}
