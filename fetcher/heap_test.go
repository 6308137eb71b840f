package fetcher

import (
	"log/slog"
	"runtime"
	"testing"
)

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// The live heap a followed partition costs, once copied and idle, is a
// few KB (issue 14's goal: RSS ≤ 100 MB + 5 KB a partition, and RSS is
// about twice the live heap under the default GOGC): 300 partitions
// against kfake, whose own growth while serving them is counted too, so
// the bound is generous: 10 KB a partition (about 5 KB measured, of which
// storage's open files and indexes are a third). A per-partition buffer or
// a copy of every answer kept per partition would exceed it.
func TestLiveHeapPerPartition(t *testing.T) {
	const parts = 300
	c, _ := sessionCluster(t, 1, parts)
	all := make([]int32, parts)
	for i := range all {
		all[i] = int32(i)
	}
	produceTo(t, c, all, 1)
	obs := &fetchCounter{}
	m := kfakeManager(t, c, Config{
		DataDir: t.TempDir(), Follow: func(topic string) bool { return topic == "s" },
		Logger: slog.New(slog.DiscardHandler), Observers: []Observer{obs},
	})
	obs.m = m
	before := liveHeap()
	startManager(t, m)
	waitCopied(t, m, parts, parts, "the copy")
	obs.waitPast(t, 2) // idle: every partition's answer carried
	perPartition := (float64(liveHeap()) - float64(before)) / parts
	t.Logf("%d partitions: %.0f bytes of live heap a partition", parts, perPartition)
	if perPartition > 10<<10 {
		t.Errorf("%d partitions cost %.0f bytes of live heap each, want at most 10 KB", parts, perPartition)
	}
}
