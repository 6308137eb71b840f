package lostfound

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kfollower/kfollower/storage"
)

// writeEvent lays out one lost+found event as SaveLost leaves it (the
// lost.json that List reads; the segment itself is not read) and returns
// its directory.
func writeEvent(t *testing.T, dataDir string, l storage.Lost) string {
	t.Helper()
	dir := filepath.Join(storage.LostFoundDir(dataDir, l.Topic, l.Partition), fmt.Sprintf("%020d-%020d", l.FirstOffset, l.LastOffset+1))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "lost.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// List finds every finished event, ordered by partition and offset, with
// its directory; it leaves out an unfinished save and names that are not a
// partition's, narrows by topic and partition, and renders a table and a
// JSON form.
func TestList(t *testing.T) {
	dataDir := t.TempDir()
	dirB := writeEvent(t, dataDir, storage.Lost{Topic: "b", Partition: 1, FirstOffset: 5, LastOffset: 9, Records: 5, Segment: "x.log"})
	dirA := writeEvent(t, dataDir, storage.Lost{Topic: "a", Partition: 0, FirstOffset: 300, LastOffset: 419, Records: 120, Segment: "y.log",
		Epochs: []storage.LostEpoch{{Epoch: 0, FirstOffset: 300, LastOffset: 419, Batches: 1, Records: 120}}})
	dirA2 := writeEvent(t, dataDir, storage.Lost{Topic: "a", Partition: 0, FirstOffset: 100, LastOffset: 149, Records: 50, Segment: "z.log"})
	// An interrupted save has no lost.json; a name that is no partition's is
	// not storage's.
	for _, d := range []string{filepath.Join(storage.LostFoundDir(dataDir, "a", 0), "partial"), filepath.Join(dataDir, "lost+found", "junk")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	rep, err := List(ListOptions{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range rep.Events {
		got = append(got, fmt.Sprintf("%s-%d@%d %s", e.Topic, e.Partition, e.FirstOffset, e.Dir))
	}
	want := []string{"a-0@100 " + dirA2, "a-0@300 " + dirA, "b-1@5 " + dirB}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var buf bytes.Buffer
	if err := rep.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "a-0") || !strings.Contains(buf.String(), "0:[300..419]") {
		t.Fatalf("table:\n%s", buf.String())
	}
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(js, []byte(`"dir":"`+dirA+`"`)) || !bytes.Contains(js, []byte(`"firstOffset":300`)) {
		t.Fatalf("json %s", js)
	}

	for _, tc := range []struct {
		opts ListOptions
		want int
	}{
		{ListOptions{Topics: []string{"b"}}, 1},
		{ListOptions{Partitions: []int32{0}}, 2},
		{ListOptions{Topics: []string{"a"}, Partitions: []int32{1}}, 0},
	} {
		tc.opts.DataDir = dataDir
		rep, err := List(tc.opts)
		if err != nil {
			t.Fatalf("%+v: %v", tc.opts, err)
		}
		if len(rep.Events) != tc.want {
			t.Fatalf("%+v: %d events %+v, want %d", tc.opts, len(rep.Events), rep.Events, tc.want)
		}
	}

	none, err := List(ListOptions{DataDir: t.TempDir()})
	if err != nil || len(none.Events) != 0 {
		t.Fatalf("no lost+found: %+v, %v", none, err)
	}
	buf.Reset()
	if err := none.WriteTable(&buf); err != nil || buf.String() != "no lost+found events\n" {
		t.Fatalf("empty table %q, %v", buf.String(), err)
	}
	if _, err := List(ListOptions{}); err == nil {
		t.Fatal("no data dir: no error")
	}
}

// A lost.json that does not parse fails the listing, naming the event,
// rather than hiding it.
func TestListUnreadableEvent(t *testing.T) {
	dataDir := t.TempDir()
	dir := writeEvent(t, dataDir, storage.Lost{Topic: "a", Partition: 0, FirstOffset: 1, LastOffset: 2})
	if err := os.WriteFile(filepath.Join(dir, "lost.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := List(ListOptions{DataDir: dataDir}); err == nil || !strings.Contains(err.Error(), dir) {
		t.Fatalf("a damaged lost.json: %v, want an error naming %s", err, dir)
	}
}
