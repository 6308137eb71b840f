package batch

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// `go test ./wire/batch -update` rewrites the seed corpus under
// testdata/fuzz from scanSeeds.
var update = flag.Bool("update", false, "rewrite the fuzz seeds under testdata/fuzz")

// scanSeeds are FuzzScan's seeds, by name. FuzzScan adds them, and
// TestFuzzSeeds keeps testdata/fuzz/FuzzScan/<name> equal to them, so the
// checked-in corpus and the f.Add seeds cannot drift apart. Inputs the
// fuzzer found stay in the corpus under their hash names, beside these.
func scanSeeds() map[string][]byte {
	b1 := Build(Spec{BaseOffset: 0, Epoch: 1, Records: 2})
	b2 := Build(Spec{BaseOffset: 2, Epoch: 3, Records: 1, Control: true, ProducerID: 1})
	b3 := Build(Spec{BaseOffset: 10, Epoch: 3, Records: 3, OffsetGap: 2, Transactional: true, ProducerID: 4})
	run := append(append(bytes.Clone(b1), b2...), b3...)
	bad := bytes.Clone(run)
	bad[len(b1)+30] ^= 0x10
	return map[string][]byte{
		"empty":         {},
		"one-batch":     b1,
		"three-batches": run,
		"partial-tail":  run[:len(run)-7],
		"zero-tail":     append(bytes.Clone(b1), make([]byte, 64)...),
		"flipped-crc":   bad,
		"short":         run[:11],
	}
}

// corpusFile is a seed in the `go test fuzz v1` format.
func corpusFile(b []byte) []byte { return fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", b) }

func TestFuzzSeeds(t *testing.T) {
	seeds := scanSeeds()
	for _, name := range slices.Sorted(maps.Keys(seeds)) {
		path := filepath.Join("testdata", "fuzz", "FuzzScan", name)
		want := corpusFile(seeds[name])
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (go test -update writes it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from scanSeeds (go test -update rewrites it)\n got %q\nwant %q", path, got, want)
		}
	}
}
