package storage

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"testing"
)

// Each fuzz target's seeds, by name. The target adds them with addSeeds,
// and TestFuzzSeeds keeps testdata/fuzz/<target>/<name> equal to them
// (`go test -update` writes them), so the checked-in corpus and the f.Add
// seeds cannot drift apart. Inputs the fuzzer found stay in the corpus
// under their hash names, beside these.
var fuzzSeeds = map[string]map[string][]byte{
	"FuzzCheckpoint": {
		"kafka-example": []byte("0\n2\n0 1\n1 2\n"),
		"empty":         nil,
		"version-only":  []byte("0\n"),
		"crlf-tab":      []byte("0\r\n1\r\n3\t4"),
		"leading-space": []byte("0\n1\n 0 1\n"),
		"count-short":   []byte("0\n3\n0 1\n1 2\n"),
		"non-monotonic": []byte("0\n3\n5 11\n6 12\n4 13\n"),
		"negative":      []byte("0\n1\n-1 5\n"),
		"big":           []byte("0\n1\n2147483647 9223372036854775807\n"),
	},
	"FuzzRecoverTail": {
		"nothing":       {},
		"zeros":         make([]byte, 100),
		"whole-batch":   build(6, 1, 2),
		"two-batches":   append(build(6, 1, 2), build(8, 0, 1)...),
		"partial-batch": build(6, 1, 2)[:40],
	},
}

// addSeeds adds target's seeds to f, in name order.
func addSeeds(f *testing.F, target string) {
	seeds := fuzzSeeds[target]
	if len(seeds) == 0 {
		f.Fatalf("no seeds for %s", target)
	}
	for _, name := range slices.Sorted(maps.Keys(seeds)) {
		f.Add(seeds[name])
	}
}

// corpusFile is a seed in the `go test fuzz v1` format.
func corpusFile(b []byte) []byte { return fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", b) }

func TestFuzzSeeds(t *testing.T) {
	for _, target := range slices.Sorted(maps.Keys(fuzzSeeds)) {
		for _, name := range slices.Sorted(maps.Keys(fuzzSeeds[target])) {
			testdataFile(t, filepath.Join("testdata", "fuzz", target, name), corpusFile(fuzzSeeds[target][name]))
		}
	}
}
