package batch

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// writeSeeds writes fuzz seed inputs in the `go test fuzz v1` format under
// testdata/fuzz/<target>, where `go test` reads a checked-in corpus. It
// runs only with KFOLLOWER_WRITE_SEEDS=1, so the files stay reviewable
// bytes in git rather than something each run rewrites.
func writeSeeds(t *testing.T, target string, seeds map[string][]byte) {
	t.Helper()
	if os.Getenv("KFOLLOWER_WRITE_SEEDS") != "1" {
		t.Skip("set KFOLLOWER_WRITE_SEEDS=1 to rewrite testdata/fuzz")
	}
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range seeds {
		data := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestWriteScanSeeds(t *testing.T) {
	b1 := Build(Spec{BaseOffset: 0, Epoch: 1, Records: 2})
	b2 := Build(Spec{BaseOffset: 2, Epoch: 3, Records: 1, Control: true, ProducerID: 1})
	b3 := Build(Spec{BaseOffset: 10, Epoch: 3, Records: 3, OffsetGap: 2, Transactional: true, ProducerID: 4})
	run := append(append(append([]byte{}, b1...), b2...), b3...)
	bad := append([]byte{}, run...)
	bad[len(b1)+30] ^= 0x10
	writeSeeds(t, "FuzzScan", map[string][]byte{
		"one-batch":     b1,
		"three-batches": run,
		"partial-tail":  run[:len(run)-7],
		"zero-tail":     append(append([]byte{}, b1...), make([]byte, 64)...),
		"flipped-crc":   bad,
		"short":         run[:11],
	})
}
