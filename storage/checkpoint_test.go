package storage

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kfollower/kfollower/wire/batch"
)

// `go test ./storage -update` rewrites the files under testdata from the
// tests' own values: the golden bytes (testdata/golden) and the fuzz seed
// corpus (testdata/fuzz, from the seed tables of seeds_test.go). Read the
// diff before committing it.
var update = flag.Bool("update", false, "rewrite testdata/golden and the fuzz seeds under testdata/fuzz")

// golden checks got against testdata/golden/name.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	testdataFile(t, filepath.Join("testdata", "golden", name), got)
}

// testdataFile fails the test when the file at path does not hold want;
// with -update it writes want there first.
func testdataFile(t *testing.T, path string, want []byte) {
	t.Helper()
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
		t.Errorf("%s differs from the test's value (go test -update rewrites it)\n got %q\nwant %q", path, got, want)
	}
}

func TestEpochCheckpointGolden(t *testing.T) {
	entries := []EpochEntry{{0, 0}, {1, 2}, {5, 1234567890123}}
	b := formatEpochCheckpoint(entries)
	// The exact text of Kafka's LeaderEpochCheckpointFile (CheckpointFile:
	// version, count, one "<epoch> <startOffset>" line each).
	if string(b) != "0\n3\n0 0\n1 2\n5 1234567890123\n" {
		t.Fatalf("%q", b)
	}
	golden(t, "leader-epoch-checkpoint", b)
	back, err := ParseEpochCheckpoint(b)
	if err != nil || fmt.Sprint(back) != fmt.Sprint(entries) {
		t.Fatalf("round trip %v %v", back, err)
	}
	golden(t, "leader-epoch-checkpoint-empty", formatEpochCheckpoint(nil))
}

func TestParseEpochCheckpoint(t *testing.T) {
	cases := []struct {
		in   string
		want string // fmt of entries, or "error"
	}{
		{"", "[]"},
		{"0\n", "[]"},
		{"0\n0\n", "[]"},
		{"0\n2\n0 1\n1 2\n", "[{0 1} {1 2}]"},
		{"0\r\n1\r\n3 4\r\n", "[{3 4}]"},
		{"0\n1\n3\t4", "[{3 4}]"},
		{"0\n1\n3  4 ", "[{3 4}]"},
		{"0\n1\n+3 4\n", "[{3 4}]"},
		{"1\n0\n", "error"},
		{"x\n", "error"},
		{" 0\n0\n", "error"},
		{"0\n2\n0 1\n", "error"},
		{"0\n1\n0 1\n1 2\n", "error"},
		{"0\n1\n 0 1\n", "error"},
		{"0\n1\n0 1 2\n", "error"},
		{"0\n1\n0\n", "error"},
		{"0\n1\n0 x\n", "error"},
		{"0\n1\n2147483648 1\n", "error"},
		{"0\n1\n\n", "error"},
		{"0\n-1\n", "error"},
	}
	for _, c := range cases {
		got, err := ParseEpochCheckpoint([]byte(c.in))
		s := fmt.Sprint(got)
		if got == nil && err == nil {
			s = "[]"
		}
		if err != nil {
			s = "error"
		}
		if s != c.want {
			t.Errorf("parse %q = %s (%v), want %s", c.in, s, err, c.want)
		}
	}
}

func TestPartitionMetadataGolden(t *testing.T) {
	var id TopicID
	for i := range id {
		id[i] = byte(i * 17)
	}
	b := formatPartitionMetadata(id)
	if !strings.HasPrefix(string(b), "version: 0\ntopic_id: ") || strings.HasSuffix(string(b), "\n") || len(id.String()) != 22 {
		t.Fatalf("%q", b)
	}
	golden(t, "partition.metadata", b)
	back, err := ParsePartitionMetadata(b)
	if err != nil || back != id {
		t.Fatalf("round trip %v %v", back, err)
	}
	for _, bad := range []string{"", "version: 0\n", "version: x\ntopic_id: " + id.String(),
		"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", "version: 0\ntopic_id: short", "topic_id: x\nversion: 0"} {
		if _, err := ParsePartitionMetadata([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	// Kafka's Uuid for the bytes 0..15 prints as AAECAwQFBgcICQoLDA0ODw.
	var seq TopicID
	for i := range seq {
		seq[i] = byte(i)
	}
	if seq.String() != "AAECAwQFBgcICQoLDA0ODw" {
		t.Fatal(seq.String())
	}
}

func TestPartitionMetadataOnOpen(t *testing.T) {
	dir := t.TempDir()
	id := TopicID{1, 2, 3}
	opts := testOpts()
	opts.TopicID = id
	l := openT(t, dir, opts)
	if got, ok := l.TopicID(); !ok || got != id {
		t.Fatal(got)
	}
	l.Close()
	opts.TopicID = TopicID{9}
	if _, err := Open(dir, "t", 0, opts); err == nil {
		t.Fatal("opened with a different topic id")
	}
}

// The index files of a sealed segment, byte for byte: 8-byte (relative
// offset, position) and 12-byte (timestamp, relative offset) entries, per
// batch every index.interval.bytes, final time entry at seal, no
// preallocation left.
func TestIndexGolden(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, Options{Logger: quiet, IndexIntervalBytes: 4096, SegmentBytes: 64 << 10})
	val := bytes.Repeat([]byte("x"), 900)
	off := int64(100)
	mustAppend(t, l, build(0, 0, 100)[:0]) // no-op
	if err := l.TruncateFullyAndStartAt(100); err != nil {
		t.Fatal(err)
	}
	for i := range 120 {
		b := batch.Build(batch.Spec{BaseOffset: off, Epoch: int32(i / 50), Records: 1 + i%3, Value: val, Timestamp: 1_700_000_000_000 + int64(i%7)*1000 + int64(i)})
		mustAppend(t, l, b)
		off += int64(1 + i%3)
	}
	segs := l.Segments()
	if len(segs) < 2 {
		t.Fatalf("want a sealed segment, have %v", segs)
	}
	name := segmentName(segs[0], "")
	idx, _ := os.ReadFile(filepath.Join(l.Dir(), name+indexSuffix))
	tidx, _ := os.ReadFile(filepath.Join(l.Dir(), name+timeIndexSuffix))
	if len(idx) == 0 || len(idx)%8 != 0 || len(tidx)%12 != 0 {
		t.Fatalf("index sizes %d %d", len(idx), len(tidx))
	}
	golden(t, "sealed.index", idx)
	golden(t, "sealed.timeindex", tidx)
	// Rebuilding from the .log alone gives the same bytes (recovery path).
	for _, suf := range []string{indexSuffix, timeIndexSuffix} {
		os.Remove(filepath.Join(l.Dir(), name+suf))
	}
	l.Close()
	l = openT(t, dir, testOpts())
	idx2, _ := os.ReadFile(filepath.Join(l.Dir(), name+indexSuffix))
	tidx2, _ := os.ReadFile(filepath.Join(l.Dir(), name+timeIndexSuffix))
	if !bytes.Equal(idx, idx2) || !bytes.Equal(tidx, tidx2) {
		t.Fatal("rebuilt indexes differ")
	}
	// Each offset entry names the last offset of the batch at its position
	// (what DumpLogSegments --verify-index-only checks).
	log, _ := os.ReadFile(filepath.Join(l.Dir(), name+logSuffix))
	ents, err := decodeOffsetIndex(idx, int64(len(log)))
	if err != nil {
		t.Fatal(err)
	}
	prev := int64(0)
	for _, e := range ents {
		h, err := batch.ParseHeader(log[e.pos:])
		if err != nil || h.LastOffset() != segs[0]+int64(e.rel) || int64(e.pos)-prev <= 4096 {
			t.Fatalf("entry %+v: %v %+v (prev %d)", e, err, h, prev)
		}
		prev = int64(e.pos)
	}
}
