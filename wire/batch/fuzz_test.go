package batch

import (
	"bytes"
	"maps"
	"slices"
	"testing"
)

// FuzzScan checks the scanner against invariants that hold for any input:
// it never panics; the valid prefix plus the dropped tail never exceed the
// input; batches are contiguous and each one passes Check on its own;
// rescanning the valid prefix gives the same batches and no error or tail.
func FuzzScan(f *testing.F) {
	seeds := scanSeeds()
	for _, name := range slices.Sorted(maps.Keys(seeds)) {
		f.Add(seeds[name])
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		s := NewScanner(in)
		var got [][]byte
		next := 0
		for s.Next() {
			if s.Pos() != next {
				t.Fatalf("batch at %d, want %d", s.Pos(), next)
			}
			h, err := Check(s.Batch())
			if err != nil {
				t.Fatalf("scanned batch fails Check: %v", err)
			}
			if h != s.Header() {
				t.Fatal("header differs from Check's")
			}
			next += h.Size()
			got = append(got, s.Batch())
		}
		if s.Valid() != next || s.Valid()+s.Tail() > len(in) {
			t.Fatalf("valid %d tail %d len %d next %d", s.Valid(), s.Tail(), len(in), next)
		}
		if s.Err() == nil && s.Valid()+s.Tail() != len(in) {
			t.Fatalf("no error but %d bytes unaccounted", len(in)-s.Valid()-s.Tail())
		}
		if s.Err() != nil && s.Tail() != 0 {
			t.Fatal("error and tail both set")
		}
		r := NewScanner(in[:s.Valid()])
		i := 0
		for r.Next() {
			if i >= len(got) || !bytes.Equal(r.Batch(), got[i]) {
				t.Fatal("rescan differs")
			}
			i++
		}
		if i != len(got) || r.Err() != nil || r.Tail() != 0 {
			t.Fatalf("rescan: %d batches, err %v, tail %d", i, r.Err(), r.Tail())
		}
	})
}
