package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// waitDiskSettled judges the disk at rest when nothing is in flight, no
// write or discard completed, and under settleDirty is dirty or under
// writeback, at settleLooks looks in a row settleEvery apart.
const (
	settleEvery = 100 * time.Millisecond
	settleLooks = 3
	settleDirty = 16 << 20 // bytes Dirty + Writeback in /proc/meminfo
	settleLimit = time.Minute
)

// waitDiskSettled syncs, then waits until the disk that holds the temp dir
// is at rest, at most settleLimit, and returns what it waited
// for, to log beside the next figure.
//
// Why: a contender that copies ~1 GiB leaves work on the disk when it ends
// (under --flush os, its dirty pages; its data dir, removed, the
// filesystem's discards, which this project's machines mount with
// `discard`; the broker replica's round, broker 4's deleted copy). The
// contender after it paid for that, or not, by its place in the round: the
// consumer, which writes nothing, never did. A contender now starts on a
// disk at rest. A disk that does not settle in settleLimit (another
// process writing) is noted, and the run goes on.
func waitDiskSettled() string {
	start := time.Now()
	syscall.Sync()
	stat, err := diskStatPath(os.TempDir())
	if err != nil {
		return fmt.Sprintf("disk not watched (%v)", err)
	}
	var last diskSample
	quiet := 0
	for {
		s, err := sampleDisk(stat)
		if err != nil {
			return fmt.Sprintf("disk not watched (%v)", err)
		}
		if s.inFlight == 0 && s.dirty < settleDirty && s.done == last.done {
			quiet++
		} else {
			quiet = 0
		}
		last = s
		if quiet >= settleLooks {
			return fmt.Sprintf("disk at rest after %v", time.Since(start).Round(10*time.Millisecond))
		}
		if time.Since(start) > settleLimit {
			return fmt.Sprintf("disk NOT at rest after %v (%d I/Os in flight, %d MiB dirty or under writeback)",
				settleLimit, s.inFlight, s.dirty>>20)
		}
		time.Sleep(settleEvery)
	}
}

// diskSample is one look at the disk.
type diskSample struct {
	inFlight int64 // I/Os in flight
	done     int64 // writes and discards completed, ever
	dirty    int64 // bytes Dirty + Writeback, the whole machine's
}

// diskStatPath returns the block layer's stat file of the device that
// holds path (Documentation/block/stat.rst): /sys/dev/block/MAJ:MIN/stat,
// which a partition has too.
func diskStatPath(path string) (string, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return "", fmt.Errorf("stat %s: %w", path, err)
	}
	// Linux's dev_t encoding (glibc's gnu_dev_major/minor).
	major := (st.Dev>>8)&0xfff | (st.Dev>>32)&^0xfff
	minor := st.Dev&0xff | (st.Dev>>12)&^0xff
	p := fmt.Sprintf("/sys/dev/block/%d:%d/stat", major, minor)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s holds %s on no block device: %w", p, path, err)
	}
	return p, nil
}

func sampleDisk(stat string) (diskSample, error) {
	b, err := os.ReadFile(stat)
	if err != nil {
		return diskSample{}, err
	}
	f := strings.Fields(string(b))
	// Fields: 5 writes completed, 9 in flight, 12 discards completed
	// (kernels since 4.18; older ones have 11 fields, no discards).
	if len(f) < 11 {
		return diskSample{}, fmt.Errorf("%s: %d fields, want at least 11", stat, len(f))
	}
	num := func(i int) int64 {
		if i >= len(f) {
			return 0
		}
		n, _ := strconv.ParseInt(f[i], 10, 64)
		return n
	}
	s := diskSample{inFlight: num(8), done: num(4) + num(11)}
	mi, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return diskSample{}, err
	}
	for _, line := range strings.Split(string(mi), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "Dirty" && k != "Writeback") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return diskSample{}, fmt.Errorf("/proc/meminfo %s: %w", k, err)
		}
		s.dirty += kb << 10
	}
	return s, nil
}

// waitCreationFast waits, at most creationLimit, until creating a file in
// the temp dir's filesystem costs less than creationFast, and returns what
// it found, to log beside the start-up's figures, and a func that removes
// its files, to call once the figures are taken.
//
// Why: on an ext4 without a journal (this project's machines), a new
// inode skips every inode deleted in the last 60 s, 360 s while its
// inode table block is dirty (fs/ext4/ialloc.c, recently_deleted); after
// a large delete, such as the previous BenchmarkScale's data dir of
// 10,000 logs, each creation cost 0.3–0.8 ms of kernel CPU for minutes,
// and the next start-up, which creates tens of thousands of files, took
// 34 s in place of 4–6 s. Each look syncs (so the deleted inodes' table
// blocks are clean), then times the creation of probeDirs directories of
// probeFiles files each, kept until the end so that the probe deletes
// nothing meanwhile.
func waitCreationFast() (string, func()) {
	root, err := os.MkdirTemp("", "kfollower-creation-probe-")
	if err != nil {
		return fmt.Sprintf("file creation not probed (%v)", err), func() {}
	}
	cleanup := func() { os.RemoveAll(root) }
	start := time.Now()
	for i := 0; ; i++ {
		syscall.Sync()
		// As a start-up creates them: a directory each, a few files in
		// it. ext4 spreads new directories over its block groups
		// (find_group_orlov), so these meet every group a removed data
		// dir of many logs left its deleted inodes in, where files in
		// one directory meet one group; and their writes dirty the
		// inode tables as a start-up's do, which makes the window the
		// longer one.
		t0 := time.Now()
		for d := range probeDirs {
			dir := filepath.Join(root, fmt.Sprintf("%d-%d", i, d))
			if err := os.Mkdir(dir, 0o755); err != nil {
				return fmt.Sprintf("file creation not probed (%v)", err), cleanup
			}
			for j := range probeFiles {
				f, err := os.Create(filepath.Join(dir, strconv.Itoa(j)))
				if err != nil {
					return fmt.Sprintf("file creation not probed (%v)", err), cleanup
				}
				f.Close()
			}
		}
		each := time.Since(t0) / (probeDirs * (1 + probeFiles))
		if each < creationFast {
			return fmt.Sprintf("file creation at %v a file after %v", each.Round(time.Microsecond), time.Since(start).Round(time.Second)), cleanup
		}
		if time.Since(start) > creationLimit {
			return fmt.Sprintf("file creation still SLOW after %v: %v a file (inodes deleted in the last minutes, docs/testing.md)",
				creationLimit, each.Round(time.Microsecond)), cleanup
		}
		time.Sleep(10 * time.Second)
	}
}

const (
	probeDirs     = 100
	probeFiles    = 2
	creationFast  = 150 * time.Microsecond
	creationLimit = 7 * time.Minute
)
