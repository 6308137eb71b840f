package integration

import (
	"encoding/binary"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/kfollower/kfollower/storage"
	"github.com/kfollower/kfollower/wire/batch"
)

var updateDumpLog = flag.Bool("update-dumplog", false, "TestDumpLogJudgeRealTool: rewrite testdata/dumplog/ with the tool's output for KAFKA_VERSION")

// judgeCase is one partition directory the judge must clear or refuse.
type judgeCase struct {
	topic string
	gaps  bool // judged as a compacted log
	// fail lists the modes in which the judge must refuse the files, with
	// a word its error must contain.
	fail map[dumpMode]string
}

// The cases: a healthy log on a topic whose name holds "not" (the old
// judge grepped for that word), one with a wrong offset index entry, one
// with a wrong time index entry, a torn tail, and offsets with holes, as
// compaction leaves them, judged as compacted and as not.
var judgeCases = []judgeCase{
	{topic: "notifications"},
	{topic: "mismatch", fail: map[dumpMode]string{dumpVerifyIndex: "Mismatches in"}},
	{topic: "timemismatch", fail: map[dumpMode]string{dumpVerifyIndex: "timestamp mismatch"}},
	{topic: "torn", fail: map[dumpMode]string{dumpDeep: "invalid bytes at the end"}},
	{topic: "holes", fail: map[dumpMode]string{dumpDeep: "non-consecutive offsets"}},
	{topic: "holes", gaps: true},
	{topic: "notifications", gaps: true},
}

// writeJudgeLogs writes each case's partition directory under dataDir
// with kfollower's storage, then damages it as the case says.
func writeJudgeLogs(t *testing.T, dataDir string) {
	t.Helper()
	for _, topic := range []string{"notifications", "mismatch", "timemismatch", "torn", "holes"} {
		l, err := storage.Open(dataDir, topic, 0, storage.Options{SegmentBytes: 1024, IndexIntervalBytes: 200})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			s := batch.Spec{BaseOffset: int64(3 * i), Records: 3, Key: []byte("k"), Timestamp: 1_700_000_000_000 + int64(10*i)}
			if topic == "holes" {
				// Records 0, 2, 4 of each batch, and offsets 5 to 8 between
				// batches, gone.
				s = batch.Spec{BaseOffset: int64(9 * i), Records: 3, OffsetGap: 1, Key: []byte("k"), Timestamp: s.Timestamp}
			}
			// One append a batch: a segment rolls only between appends.
			if err := l.Append(batch.Build(s)); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	first := func(topic, suffix string) string {
		t.Helper()
		fs, _ := filepath.Glob(filepath.Join(storage.PartitionDir(dataDir, topic, 0), "*"+suffix))
		slices.Sort(fs)
		if len(fs) < 2 {
			t.Fatalf("%s: want several %s files, got %v", topic, suffix, fs)
		}
		return fs[0]
	}
	patch := func(path string, at int, f func([]byte)) {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil || len(b) < at+8 {
			t.Fatalf("%s: %d bytes, %v", path, len(b), err)
		}
		f(b[at:])
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// An offset index entry is (relative offset, position), 4+4 bytes; a
	// time index entry (timestamp, relative offset), 8+4 (OffsetIndex,
	// TimeIndex). Shift the first entry's offset by one, and its time.
	patch(first("mismatch", ".index"), 0, func(b []byte) { binary.BigEndian.PutUint32(b, binary.BigEndian.Uint32(b)+1) })
	patch(first("timemismatch", ".timeindex"), 0, func(b []byte) { binary.BigEndian.PutUint64(b, binary.BigEndian.Uint64(b)+1) })
	// A torn tail: the first 30 bytes of a batch whose length field
	// promises more, as a crash mid-write leaves it.
	tornLog := first("torn", ".log")
	b, err := os.ReadFile(tornLog)
	if err == nil {
		err = os.WriteFile(tornLog, append(b, b[:30]...), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// caseFiles lists the files of a case's directory that mode reads.
func caseFiles(t *testing.T, dataDir, topic string, mode dumpMode) []string {
	t.Helper()
	dir := storage.PartitionDir(dataDir, topic, 0)
	pats := []string{"*.index", "*.timeindex"}
	if mode == dumpDeep {
		pats = []string{"*.log"}
	}
	var out []string
	for _, p := range pats {
		fs, _ := filepath.Glob(filepath.Join(dir, p))
		out = append(out, fs...)
	}
	if len(out) == 0 {
		t.Fatalf("no %v in %s", pats, dir)
	}
	return out
}

// judgeAll runs every case against the reports of the three runs.
func judgeAll(t *testing.T, dataDir string, reports map[dumpMode]*dumpReport) {
	t.Helper()
	for _, c := range judgeCases {
		for mode, rep := range reports {
			err := rep.judge(mode, caseFiles(t, dataDir, c.topic, mode), c.gaps)
			want, fail := c.fail[mode]
			switch {
			case !fail && err != nil:
				t.Errorf("%s (gaps %v) %s: refused: %v", c.topic, c.gaps, mode, err)
			case fail && err == nil:
				t.Errorf("%s (gaps %v) %s: cleared, want refused with %q", c.topic, c.gaps, mode, want)
			case fail && !strings.Contains(err.Error(), want):
				t.Errorf("%s (gaps %v) %s: refused with %v, want %q", c.topic, c.gaps, mode, err, want)
			}
		}
	}
}

// Kafka's own tool, of the version under test, on files kfollower's
// storage wrote: the judge clears the healthy ones and refuses each damage
// for what it is, whichever file of a run it is in.
func TestDumpLogJudgeRealTool(t *testing.T) {
	dataDir := t.TempDir()
	writeJudgeLogs(t, dataDir)
	reports := map[dumpMode]*dumpReport{}
	for _, mode := range []dumpMode{dumpDeep, dumpVerifyIndex, dumpSanity} {
		var files []string
		for _, topic := range []string{"notifications", "mismatch", "timemismatch", "torn", "holes"} {
			files = append(files, caseFiles(t, dataDir, topic, mode)...)
		}
		out, err := kafka.RunTool(kafka.ToolDumpLogSegments, append(mode.args(), "--files", strings.Join(files, ","))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s %s: %d stdout lines, stderr:\n%s", out.Class, mode, len(lines(out.Stdout)), out.Stderr)
		reports[mode] = parseDumpLog(out.Stdout, out.Stderr)
		if *updateDumpLog {
			writeCaptured(t, mode, dataDir, out)
		}
	}
	judgeAll(t, dataDir, reports)
}

// The judge on output captured from the Scala tool (Kafka 3.9.2, the same
// class up to 4.2) and the Java port (4.4.0), with no JVM: the cases above,
// run when the files were written (go test ./integration -run
// TestDumpLogJudgeRealTool -update-dumplog, once per KAFKA_VERSION).
func TestDumpLogJudgeCaptured(t *testing.T) {
	for _, v := range []string{"3.9.2", "4.4.0"} {
		t.Run(v, func(t *testing.T) {
			dataDir := t.TempDir()
			writeJudgeLogs(t, dataDir) // for the file names the cases list
			reports := map[dumpMode]*dumpReport{}
			for _, mode := range []dumpMode{dumpDeep, dumpVerifyIndex, dumpSanity} {
				read := func(stream string) string {
					b, err := os.ReadFile(capturedPath(v, mode, stream))
					if err != nil {
						t.Fatal(err)
					}
					return strings.ReplaceAll(string(b), "DATADIR", dataDir)
				}
				reports[mode] = parseDumpLog(read("stdout"), read("stderr"))
			}
			judgeAll(t, dataDir, reports)
		})
	}
	// A line the judge does not know is a refusal, not a pass.
	rep := parseDumpLog("Dumping /d/t-0/00000000000000000000.log\nSomething new: all is well\n", "")
	if err := rep.judge(dumpDeep, []string{"/d/t-0/00000000000000000000.log"}, false); err == nil || !strings.Contains(err.Error(), "cannot read") {
		t.Fatalf("unknown output judged %v, want a refusal", err)
	}
}

func capturedPath(version string, mode dumpMode, stream string) string {
	name := strings.TrimPrefix(mode.String(), "--")
	return filepath.Join("testdata", "dumplog", version+"-"+name+"."+stream)
}

func writeCaptured(t *testing.T, mode dumpMode, dataDir string, out kafka.ToolOutput) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join("testdata", "dumplog"), 0o755); err != nil {
		t.Fatal(err)
	}
	for stream, text := range map[string]string{"stdout": out.Stdout, "stderr": out.Stderr} {
		if err := os.WriteFile(capturedPath(kafka.Version(), mode, stream), []byte(strings.ReplaceAll(text, dataDir, "DATADIR")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
