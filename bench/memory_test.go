package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// pageReportingOrder is the kernel's free page reporting threshold
// (mm/page_reporting.c): a balloon driver that reports free pages
// (virtio_balloon's free page reporting) hands every free block of at least
// this order back to the host, about 2 s after it was freed.
const pageReportingOrder = "/sys/module/page_reporting/parameters/page_reporting_order"

// handedBack ends holdGuestMemory's note when it changed nothing.
const handedBack = "a writer's figures include the host's backing of freed memory"

// holdGuestMemory keeps the guest's freed memory in the guest for the
// benchmark's duration, where a balloon driver would hand it back to the
// host, and returns what it did, to log beside the figures.
//
// Why: on such a virtual machine the next writer that takes memory handed
// back pays for the host to back it again. Measured on this project's 2-core
// machines, writing 1 GiB into the page cache cost 0.19–0.28 CPU-s when its
// pages had been freed a moment before, and 1.6–3.2 CPU-s when they had been
// handed back. Every contender that copies into a page cache (kfollower, the
// broker replica) paid that or not by the timing of the contender before it
// (whose data dir, removed, frees a GiB), while the consumer, which reads to
// nowhere and reuses its heap, never does: the largest part of the
// round-to-round spread, and a cost of the machine, not of the copy. A host
// whose memory is full of page cache (any busy server) takes new pages by
// reclaim, never from the host.
//
// How: page_reporting_order is raised to the largest value the kernel takes,
// the number of page orders, above every free block's order, so none is
// reported; b.Cleanup restores it. Then 2 GiB are written to the temp dir's
// filesystem and removed, untimed, so the contenders start from backed
// pages; how long that took is logged (the handback's cost, once).
// KFOLLOWER_BENCH_GUEST_MEMORY=as-is leaves the machine as it is, to
// measure with the handback. Where there is no such parameter (no free page
// reporting) or it cannot be written (not root), nothing is changed and the
// note says so.
func holdGuestMemory(b *testing.B) string {
	b.Helper()
	old, err := os.ReadFile(pageReportingOrder)
	switch {
	case os.IsNotExist(err):
		return "no free page reporting on this machine: nothing to hold"
	case err != nil:
		return fmt.Sprintf("free page reporting left as it is (%v): %s", err, handedBack)
	case os.Getenv("KFOLLOWER_BENCH_GUEST_MEMORY") == "as-is":
		return fmt.Sprintf("free page reporting left on (page_reporting_order %s, KFOLLOWER_BENCH_GUEST_MEMORY=as-is): %s",
			strings.TrimSpace(string(old)), handedBack)
	}
	prev := strings.TrimSpace(string(old))
	// The kernel rejects an order above the number of orders
	// (param_set_uint_minmax); the largest it takes reports nothing.
	set := -1
	for n := 16; n > 0; n-- {
		if err := os.WriteFile(pageReportingOrder, []byte(strconv.Itoa(n)), 0); err == nil {
			set = n
			break
		} else if os.IsPermission(err) {
			return fmt.Sprintf("free page reporting left on (%v): %s", err, handedBack)
		}
	}
	if set < 0 {
		return fmt.Sprintf("free page reporting left on: %s took no order from 16 down to 1: %s", pageReportingOrder, handedBack)
	}
	b.Cleanup(func() {
		if err := os.WriteFile(pageReportingOrder, []byte(prev), 0); err != nil {
			b.Errorf("restoring %s to %s: %v", pageReportingOrder, prev, err)
		}
	})
	took, err := touchPageCache(2 << 30)
	if err != nil {
		b.Fatalf("warming the guest's memory: %v", err)
	}
	return fmt.Sprintf("free page reporting held off for the run (page_reporting_order %s → %d, restored at the end); 2 GiB written and removed first in %v",
		prev, set, took.Round(time.Millisecond))
}

// touchPageCache writes n bytes into a new file in the temp dir and removes
// it, returning the time the writes took: it leaves n bytes of free pages
// that the guest has just used.
func touchPageCache(n int) (time.Duration, error) {
	dir, err := os.MkdirTemp("", "kfollower-bench-warm-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	f, err := os.Create(filepath.Join(dir, "warm"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 8<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	start := time.Now()
	for written := 0; written < n; written += len(buf) {
		if _, err := f.Write(buf); err != nil {
			return 0, fmt.Errorf("writing %s: %w", f.Name(), err)
		}
	}
	took := time.Since(start)
	// The pages are dropped with the file, never written back.
	if err := f.Truncate(0); err != nil {
		return 0, fmt.Errorf("truncating %s: %w", f.Name(), err)
	}
	return took, nil
}
