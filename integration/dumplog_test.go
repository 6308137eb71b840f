package integration

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kfollower/kfollower/integration/kafka"
	"github.com/kfollower/kfollower/storage"
)

// checkWithDumpLogSegments has Kafka's own reader judge our files (the
// promise of docs/design.md that Kafka's DumpLogSegments reads them): every
// batch and record decodes (deep iteration, all codecs), every offset and
// time index entry matches the log, and the indexes pass the sanity check
// a broker runs at startup. gaps says offsets may be missing between or
// inside batches (a compacted topic), which the tool may report as
// non-consecutive records. May, not must: it compares record offsets only,
// so batches removed whole before records that follow on from each other
// leave nothing to report.
func checkWithDumpLogSegments(t *testing.T, dataDir, topic string, p int32, gaps bool) {
	t.Helper()
	dir := storage.PartitionDir(dataDir, topic, p)
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	idx, _ := filepath.Glob(filepath.Join(dir, "*.index"))
	tidx, _ := filepath.Glob(filepath.Join(dir, "*.timeindex"))
	if len(logs) == 0 || len(idx) != len(logs) || len(tidx) != len(logs) {
		t.Fatalf("%s: want a .index and .timeindex per .log, got %d, %d, %d", dir, len(logs), len(idx), len(tidx))
	}
	indexes := append(slices.Clone(idx), tidx...)
	for _, run := range []struct {
		mode  dumpMode
		files []string
	}{{dumpDeep, logs}, {dumpVerifyIndex, indexes}, {dumpSanity, indexes}} {
		out, err := kafka.RunTool(kafka.ToolDumpLogSegments, append(run.mode.args(), "--files", strings.Join(run.files, ","))...)
		if err != nil {
			t.Fatalf("DumpLogSegments %s on %s: %v", run.mode, dir, err)
		}
		rep := parseDumpLog(out.Stdout, out.Stderr)
		if err := rep.judge(run.mode, run.files, gaps); err != nil {
			t.Fatalf("%s %s on %s: %v\n---- stdout ----\n%s\n---- stderr ----\n%s", out.Class, run.mode, dir, err, head(out.Stdout, 30), head(out.Stderr, 30))
		}
	}
}

// dumpMode is how DumpLogSegments is asked to look at files.
type dumpMode int

const (
	dumpDeep        dumpMode = iota // .log files: every batch and record
	dumpVerifyIndex                 // .index/.timeindex: entries against the log
	dumpSanity                      // .index/.timeindex: the broker's startup check
)

func (m dumpMode) args() []string {
	return [][]string{{"--deep-iteration"}, {"--verify-index-only"}, {"--index-sanity-check"}}[m]
}

func (m dumpMode) String() string {
	return [...]string{"--deep-iteration", "--verify-index-only", "--index-sanity-check"}[m]
}

// dumpFile is what DumpLogSegments said of one file.
type dumpFile struct {
	dumped         bool // a "Dumping <file>" line
	batches        int
	records        int
	invalid        []string // batch lines with isvalid: false
	trailing       string   // "Found N invalid bytes at the end of ..."
	empty          bool     // "<file> is empty." (an index without entries)
	sane           bool     // "<file> passed sanity check."
	problems       []string // index mismatches, out-of-order or missing entries
	nonConsecutive []string // "a is followed by b" pairs: offsets missing
}

// dumpReport is DumpLogSegments' output read line by line: per-file
// sections on stdout ("Dumping <file>" and what follows) and the verdicts
// it prints to stderr at the end, each naming its file. A line of neither
// form is kept in unknown: the judge refuses output it cannot read rather
// than guess at it.
type dumpReport struct {
	files   map[string]*dumpFile // by path, as given on the command line
	unknown []string
}

// The line forms of DumpLogSegments, alike in the Scala tool
// (kafka.tools.DumpLogSegments, Kafka 3.9 to 4.2) and its Java port
// (org.apache.kafka.tools.DumpLogSegments, 4.3 on): dumpLog, dumpIndex,
// dumpTimeIndex and the error summaries printed by main.
var (
	reDumping     = regexp.MustCompile(`^Dumping (.+)$`)
	reLogStart    = regexp.MustCompile(`^Log starting offset: -?\d+$`)
	reBatch       = regexp.MustCompile(`^baseOffset: -?\d+ lastOffset: -?\d+ count: \d+ .* isvalid: (true|false)$`)
	reRecord      = regexp.MustCompile(`^\| offset: -?\d+ `)
	reTrailing    = regexp.MustCompile(`^Found (\d+) invalid bytes at the end of (.+)$`)
	reEmpty       = regexp.MustCompile(`^(.+) is empty\.$`)
	reSane        = regexp.MustCompile(`^(.+) passed sanity check\.$`)
	reIndexEntry  = regexp.MustCompile(`^offset: -?\d+ position: \d+$`)
	reTimeEntry   = regexp.MustCompile(`^timestamp: -?\d+ offset: -?\d+$`)
	reProblemHead = regexp.MustCompile(`^(Mismatches in :|Found timestamp mismatch in :|Found out of order timestamp in :|The following indexed offsets are not found in (?:the log|:))(.+)$`)
	reProblem     = regexp.MustCompile(`^\s+(Index offset: -?\d+, log offset: -?\d+|Index timestamp: -?\d+, log timestamp: -?\d+|Index timestamp: -?\d+, Previously indexed timestamp: -?\d+|Indexed offset: -?\d+, found log offset: -?\d+)$`)
	reGapHead     = regexp.MustCompile(`^Non-consecutive offsets in (.+)$`)
	reGap         = regexp.MustCompile(`^\s+(-?\d+) is followed by (-?\d+)$`)
)

// parseDumpLog reads DumpLogSegments' stdout and stderr.
func parseDumpLog(stdout, stderr string) *dumpReport {
	r := &dumpReport{files: map[string]*dumpFile{}}
	file := func(path string) *dumpFile {
		f := r.files[path]
		if f == nil {
			f = &dumpFile{}
			r.files[path] = f
		}
		return f
	}
	var cur *dumpFile // the file the stdout lines are about
	for _, l := range lines(stdout) {
		if m := reDumping.FindStringSubmatch(l); m != nil {
			cur = file(m[1])
			cur.dumped = true
			continue
		}
		if m := reEmpty.FindStringSubmatch(l); m != nil {
			file(m[1]).empty = true
			continue
		}
		if m := reSane.FindStringSubmatch(l); m != nil {
			file(m[1]).sane = true
			continue
		}
		if cur == nil {
			r.unknown = append(r.unknown, l)
			continue
		}
		switch m := reBatch.FindStringSubmatch(l); {
		case m != nil:
			cur.batches++
			if m[1] != "true" {
				cur.invalid = append(cur.invalid, l)
			}
		case reRecord.MatchString(l):
			cur.records++
		case reTrailing.MatchString(l):
			cur.trailing = l
		case reLogStart.MatchString(l), reIndexEntry.MatchString(l), reTimeEntry.MatchString(l):
		default:
			r.unknown = append(r.unknown, l)
		}
	}
	// stderr: summaries, a heading naming the file, then indented entries.
	var problems *[]string
	for _, l := range lines(stderr) {
		if m := reProblemHead.FindStringSubmatch(l); m != nil {
			problems = &file(m[2]).problems
			*problems = append(*problems, strings.TrimSuffix(m[1], ":"))
			continue
		}
		if m := reGapHead.FindStringSubmatch(l); m != nil {
			problems = &file(m[1]).nonConsecutive
			continue
		}
		if problems != nil && (reProblem.MatchString(l) || reGap.MatchString(l)) {
			*problems = append(*problems, strings.TrimSpace(l))
			continue
		}
		r.unknown = append(r.unknown, l)
	}
	return r
}

// judge says whether the report clears files, all of them given to one run
// in mode: each was dumped, decoded or checked without a complaint.
// allowGaps allows non-consecutive offsets in the logs.
func (r *dumpReport) judge(mode dumpMode, files []string, allowGaps bool) error {
	if len(r.unknown) > 0 {
		return fmt.Errorf("output the judge cannot read (%d lines), first: %q", len(r.unknown), r.unknown[0])
	}
	var errs []string
	for _, path := range files {
		f := r.files[path]
		if f == nil {
			errs = append(errs, path+": not mentioned")
			continue
		}
		name := filepath.Base(path)
		if !f.dumped {
			errs = append(errs, name+": no \"Dumping\" line")
		}
		if len(f.problems) > 0 {
			errs = append(errs, fmt.Sprintf("%s: %s", name, strings.Join(f.problems, "; ")))
		}
		if f.trailing != "" {
			errs = append(errs, f.trailing)
		}
		if len(f.invalid) > 0 {
			errs = append(errs, fmt.Sprintf("%s: %d invalid batches, first: %s", name, len(f.invalid), f.invalid[0]))
		}
		if gaps := realGaps(name, f.nonConsecutive); len(gaps) > 0 && !allowGaps {
			errs = append(errs, fmt.Sprintf("%s: non-consecutive offsets %s", name, strings.Join(gaps, ", ")))
		}
		switch mode {
		case dumpDeep:
			if f.batches == 0 || f.records < f.batches {
				errs = append(errs, fmt.Sprintf("%s: %d batches, %d records decoded", name, f.batches, f.records))
			}
		case dumpSanity:
			if !f.sane && !f.empty {
				errs = append(errs, name+": no \"passed sanity check\"")
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return nil
}

// realGaps drops from a file's non-consecutive pairs the one the Java port
// (org.apache.kafka.tools.DumpLogSegments, 4.3 on) reports for every
// segment that does not start at offset 0: its dumpBatchRecords starts each
// file with a previous offset of -1 and, unlike the Scala tool, does not
// exempt the first record, so "-1 is followed by <base offset>" says only
// where the file begins.
func realGaps(name string, pairs []string) []string {
	base, err := strconv.ParseInt(strings.TrimSuffix(name, filepath.Ext(name)), 10, 64)
	var out []string
	for _, p := range pairs {
		if err == nil && p == fmt.Sprintf("-1 is followed by %d", base) {
			continue
		}
		out = append(out, p)
	}
	return out
}

func lines(s string) []string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if l = strings.TrimRight(l, "\r"); strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// head returns the first n lines of s.
func head(s string, n int) string {
	ls := strings.Split(s, "\n")
	if len(ls) > n {
		ls = append(ls[:n], "... ("+strconv.Itoa(len(ls)-n)+" more lines)")
	}
	return strings.Join(ls, "\n")
}
