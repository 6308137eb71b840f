package batch

import "testing"

// The frame scanner frames and parses headers like the scanner but leaves
// CRCs to a later validator: a flipped record byte passes it and fails the
// full scan; a partial tail is dropped by both.
func TestFrameScannerSkipsOnlyTheCRC(t *testing.T) {
	run := BuildRun(0, 1, 3, 4)
	whole := len(run)
	first, err := ParseHeader(run)
	if err != nil {
		t.Fatal(err)
	}
	run[first.Size()+HeaderSize+2] ^= 0xff // a record byte of the second batch
	run = append(run, BuildRun(12, 1, 1, 4)[:20]...)

	f := NewFrameScanner(run)
	n := 0
	for f.Next() {
		n++
	}
	if n != 3 || f.Err() != nil || f.Valid() != whole || f.Tail() != 20 {
		t.Fatalf("frame scan: %d batches, valid %d, tail %d, err %v; want 3, %d, 20, nil", n, f.Valid(), f.Tail(), f.Err(), whole)
	}
	s := NewScanner(run)
	n = 0
	for s.Next() {
		n++
	}
	if n != 1 || s.Err() == nil {
		t.Fatalf("full scan: %d batches, err %v; want 1 and a CRC error", n, s.Err())
	}
}
