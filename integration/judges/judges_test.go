package judges

import (
	"os/exec"
	"strings"
	"testing"
)

// TestEnsure installs (or finds) both judges and shows that each one runs.
func TestEnsure(t *testing.T) {
	j, err := Ensure()
	if err != nil {
		t.Fatal(err)
	}
	kv, err := exec.Command(j.Kcat, "-V").CombinedOutput()
	if err != nil || !strings.Contains(string(kv), "kcat") {
		t.Fatalf("kcat -V: %v\n%s", err, kv)
	}
	out, err := exec.Command(j.Python, "-c", "import confluent_kafka; print(confluent_kafka.libversion()[0])").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("python confluent_kafka: %v\n%s", err, out)
	}
	t.Logf("%s; confluent-kafka's librdkafka %s", strings.SplitN(string(kv), "\n", 2)[0], strings.TrimSpace(string(out)))
}
