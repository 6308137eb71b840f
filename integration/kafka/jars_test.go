package kafka

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Without Java, without Maven, or without Maven Central, the harness fails
// with a message naming exactly what is missing.
func TestEnsureJarsNamesWhatIsMissing(t *testing.T) {
	java, err := exec.LookPath("java")
	if err != nil {
		t.Fatalf("this test needs java on PATH to build its partial PATHs: %v", err)
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		t.Fatalf("this test needs mvn on PATH to build its partial PATHs: %v", err)
	}
	link := func(t *testing.T, bins ...string) string {
		dir := t.TempDir()
		for _, b := range bins {
			if err := os.Symlink(b, filepath.Join(dir, filepath.Base(b))); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	t.Run("no java", func(t *testing.T) {
		t.Setenv("PATH", link(t, mvn))
		t.Setenv("KFOLLOWER_CACHE", t.TempDir())
		_, err := EnsureJars(DefaultVersion)
		if err == nil || !strings.Contains(err.Error(), "java is not on PATH") {
			t.Fatalf("want an error naming java, got %v", err)
		}
	})
	t.Run("no maven", func(t *testing.T) {
		// mvn's own script needs a shell and coreutils; java alone is enough here.
		t.Setenv("PATH", link(t, java))
		t.Setenv("KFOLLOWER_CACHE", t.TempDir())
		_, err := EnsureJars(DefaultVersion)
		if err == nil || !strings.Contains(err.Error(), "mvn is not on PATH") {
			t.Fatalf("want an error naming mvn, got %v", err)
		}
	})
	t.Run("no maven central", func(t *testing.T) {
		// An empty local repository and a mirror nobody listens on stand in
		// for a machine that cannot reach Maven Central.
		dir := t.TempDir()
		settings := filepath.Join(dir, "settings.xml")
		err := os.WriteFile(settings, []byte(`<settings><localRepository>`+filepath.Join(dir, "repo")+`</localRepository>
<mirrors><mirror><id>nowhere</id><mirrorOf>*</mirrorOf><url>http://127.0.0.1:9/</url></mirror></mirrors></settings>`), 0o644)
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv("KFOLLOWER_MVN_FLAGS", "-s "+settings)
		cache := t.TempDir()
		t.Setenv("KFOLLOWER_CACHE", cache)
		_, err = EnsureJars(DefaultVersion)
		if err == nil || !strings.Contains(err.Error(), "from Maven Central") || !strings.Contains(err.Error(), "kafka_2.13:"+DefaultVersion) {
			t.Fatalf("want an error naming Maven Central and the artifact, got %v", err)
		}
		if _, err := os.Stat(filepath.Join(cache, "kafka-"+DefaultVersion, "lib", ".complete")); err == nil {
			t.Fatal("a failed resolution left a directory marked complete")
		}
	})
}
