package storage

import (
	"bytes"
	"errors"
	"testing"
)

// sectionBytes is what s sends.
func sectionBytes(t *testing.T, s Section) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := s.Send(&out, 0, s.Len()); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// ReadSection takes whole batches of one segment from the one holding the
// offset, within maxBytes (the first whatever its size with minOne), none
// at or past end; the same from the live log and from a view of it.
func TestReadSection(t *testing.T) {
	dir := t.TempDir()
	opts := testOpts()
	opts.SegmentBytes = 1 << 10
	l := openT(t, dir, opts)
	var batches [][]byte
	for i := range int64(12) {
		b := build(i*3, 1, 3)
		batches = append(batches, b)
		mustAppend(t, l, b)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	size := len(batches[0])
	upTo := func(n int) int { return len(bytes.Join(batches[:n], nil)) }
	perSeg := int(l.segs[0].next / 3) // batches in the first segment
	if len(l.segs) < 2 {
		t.Fatalf("%d segment(s), want two at least", len(l.segs))
	}
	v := openView(t, dir)
	for name, r := range map[string]Reader{"log": l, "view": v} {
		check := func(what string, offset int64, maxBytes int, end int64, minOne bool, wantFrom, wantN int, wantNext int64) {
			t.Helper()
			s, next, err := r.ReadSection(offset, maxBytes, end, minOne)
			if err != nil {
				t.Fatalf("%s, %s: %v", name, what, err)
			}
			if wantN == 0 {
				if s != nil || next != offset {
					t.Fatalf("%s, %s: a section (next %d), want none", name, what, next)
				}
				return
			}
			if s == nil {
				t.Fatalf("%s, %s: no section, want %d batches", name, what, wantN)
			}
			want := bytes.Join(batches[wantFrom:wantFrom+wantN], nil)
			if got := sectionBytes(t, s); !bytes.Equal(got, want) || s.Len() != len(want) || next != wantNext {
				t.Fatalf("%s, %s: %d bytes, next %d; want batches %d..%d (%d bytes), next %d", name, what, len(got), next, wantFrom, wantFrom+wantN-1, len(want), wantNext)
			}
			last := make([]byte, 1)
			if _, err := s.ReadAt(last, int64(s.Len()-1)); err != nil || last[0] != want[len(want)-1] {
				t.Fatalf("%s, %s: ReadAt of the last byte: %v", name, what, err)
			}
			if s.Stale() {
				t.Fatalf("%s, %s: stale with no truncation", name, what)
			}
		}
		check("two batches", 0, upTo(2), 100, false, 0, 2, 6)
		check("from inside a batch", 4, upTo(3)-size/2, 100, false, 1, 2, 9)
		check("a segment at most", 0, 100*size, 100, false, 0, perSeg, int64(3*perSeg))
		check("the next segment", int64(3*perSeg), len(batches[perSeg]), 100, false, perSeg, 1, int64(3*perSeg+3))
		check("end stops", 0, 100*size, 6, false, 0, 2, 6)
		check("end inside a batch", 0, 100*size, 7, false, 0, 3, 9)
		check("too small", 0, size-1, 100, false, 0, 0, 0)
		check("too small, min one", 0, size-1, 100, true, 0, 1, 3)
		check("at end", 3, 100*size, 3, true, 0, 0, 0)
		check("at the log end", 36, 100*size, 100, true, 0, 0, 0)
		if _, _, err := r.ReadSection(37, size, 100, true); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("%s: past the log end: %v, want ErrOffsetOutOfRange", name, err)
		}
	}
}

// A truncation makes every section taken before it Stale, and a section
// taken after it is not.
func TestSectionStaleAfterTruncation(t *testing.T) {
	l := openT(t, t.TempDir(), testOpts())
	mustAppend(t, l, build(0, 1, 3), build(3, 1, 3))
	before, _, err := l.ReadSection(0, 1<<20, 6, true)
	if err != nil || before == nil {
		t.Fatalf("ReadSection: %v", err)
	}
	if err := l.TruncateTo(3); err != nil {
		t.Fatal(err)
	}
	if !before.Stale() {
		t.Fatal("a section taken before a truncation is not stale")
	}
	after, _, err := l.ReadSection(0, 1<<20, 6, true)
	if err != nil || after == nil || after.Stale() {
		t.Fatalf("a section taken after the truncation: %v, %v", after, err)
	}
}
