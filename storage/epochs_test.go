package storage

import (
	"fmt"
	"testing"
)

func mustEpochs(t *testing.T, es ...EpochEntry) Epochs {
	t.Helper()
	c, err := NewEpochs(es...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func e(epoch int32, start int64) EpochEntry { return EpochEntry{epoch, start} }

// Cases from Kafka's LeaderEpochFileCacheTest (storage module,
// org.apache.kafka.storage.internals.epoch), one row each, named after the
// Kafka test where there is one.
func TestEndOffsetFor(t *testing.T) {
	cases := []struct {
		name      string
		cache     []EpochEntry
		leo       int64
		req       int32
		wantEpoch int32
		wantEnd   int64
	}{
		{"shouldReturnUndefinedOffsetIfUndefinedEpochRequested", []EpochEntry{e(2, 5)}, 11, -1, -1, -1},
		{"shouldReturnUnsupportedIfNoEpochRecorded", nil, 0, 0, -1, -1},
		{"shouldFetchEndOffsetOfEmptyCache", nil, 11, 7, -1, -1},
		{"shouldReturnLogEndOffsetIfLatestEpochRequested", []EpochEntry{e(2, 5), e(3, 6), e(4, 7)}, 100, 4, 4, 100},
		{"shouldReturnInvalidOffsetIfEpochIsRequestedWhichIsNotCurrentlyTracked", []EpochEntry{e(2, 5)}, 100, 3, -1, -1},
		{"LeaderEpochIntegrationTest epoch 5 not on leader", []EpochEntry{e(0, 0), e(2, 1), e(4, 2)}, 3, 5, -1, -1},
		{"shouldReturnFirstEpochIfRequestedEpochLessThanFirstEpoch", []EpochEntry{e(5, 11), e(6, 12), e(7, 13)}, 20, 4, 4, 11},
		{"shouldGetFirstOffsetOfSubsequentEpochWhenOffsetRequestedForPreviousEpoch", []EpochEntry{e(1, 0), e(2, 5), e(3, 9)}, 20, 2, 2, 9},
		{"previous epoch, first entry", []EpochEntry{e(1, 0), e(2, 5), e(3, 9)}, 20, 1, 1, 5},
		{"shouldReturnNextAvailableEpochIfThereIsNoExactEpochForTheOneRequested R=1", []EpochEntry{e(0, 10), e(2, 13), e(4, 17)}, 20, 1, 0, 13},
		{"shouldReturnNextAvailableEpochIfThereIsNoExactEpochForTheOneRequested R=3", []EpochEntry{e(0, 10), e(2, 13), e(4, 17)}, 20, 3, 2, 17},
		{"shouldAddEpochAndMessageOffsetToCache", []EpochEntry{e(2, 10)}, 11, 2, 2, 11},
		{"KIP-279 example: A answers epoch 2 with (1, 21)", []EpochEntry{e(1, 0), e(3, 21)}, 30, 2, 1, 21},
		{"KIP-279 example: B's end of epoch 1", []EpochEntry{e(1, 0), e(2, 11)}, 15, 1, 1, 11},
		{"testTruncation round 1 (leader)", []EpochEntry{e(1, 0), e(3, 1), e(5, 2)}, 3, 4, 3, 2},
		{"testTruncation round 3 (leader, below first)", []EpochEntry{e(1, 0), e(3, 1), e(5, 2)}, 3, 0, 0, 0},
		{"testDivergingEpochs leader end of 4", []EpochEntry{e(0, 0), e(2, 1), e(5, 2)}, 3, 4, 2, 2},
		{"negative epoch other than -1 is below the first", []EpochEntry{e(0, 3)}, 9, -2, -2, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			gotE, gotO := mustEpochs(t, c.cache...).EndOffsetFor(c.req, c.leo)
			if gotE != c.wantEpoch || gotO != c.wantEnd {
				t.Fatalf("endOffsetFor(%d) on %v leo %d = (%d, %d), want (%d, %d)", c.req, c.cache, c.leo, gotE, gotO, c.wantEpoch, c.wantEnd)
			}
		})
	}
}

func TestAssign(t *testing.T) {
	cases := []struct {
		name    string
		start   []EpochEntry
		assign  []EpochEntry
		want    []EpochEntry
		changed bool // of the last assign
	}{
		{"empty epoch replaced at same offset", []EpochEntry{e(2, 9)}, []EpochEntry{e(3, 9)}, []EpochEntry{e(3, 9)}, true},
		{"new epoch at lower offset", []EpochEntry{e(2, 6)}, []EpochEntry{e(3, 5)}, []EpochEntry{e(3, 5)}, true},
		{"older epoch at later offset drops newer", []EpochEntry{e(1, 5), e(2, 6)}, []EpochEntry{e(1, 7)}, []EpochEntry{e(1, 7)}, true},
		{"same epoch earlier offset", []EpochEntry{e(5, 11), e(6, 12), e(7, 13)}, []EpochEntry{e(7, 12)}, []EpochEntry{e(5, 11), e(7, 12)}, true},
		{"shouldNotOverwriteOffsetForALeaderEpochOnceItHasBeenAssigned", []EpochEntry{e(2, 6)}, []EpochEntry{e(2, 10)}, []EpochEntry{e(2, 6)}, false},
		{"same epoch same offset", []EpochEntry{e(2, 6)}, []EpochEntry{e(2, 6)}, []EpochEntry{e(2, 6)}, false},
		{"shouldIncreaseAndTrackEpochsAsLeadersChangeManyTimes", nil, []EpochEntry{e(0, 0), e(1, 0), e(2, 5)}, []EpochEntry{e(1, 0), e(2, 5)}, true},
		{"shouldIncreaseAndTrackEpochsAsFollowerReceivesManyMessages", nil,
			[]EpochEntry{e(0, 0), e(0, 1), e(0, 2), e(1, 3), e(1, 4), e(1, 5), e(2, 6)},
			[]EpochEntry{e(0, 0), e(1, 3), e(2, 6)}, true},
		{"epoch gap kept", []EpochEntry{e(0, 0)}, []EpochEntry{e(4, 10)}, []EpochEntry{e(0, 0), e(4, 10)}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cache := mustEpochs(t, c.start...)
			before := cache.Entries()
			var changed bool
			for _, a := range c.assign {
				var err error
				prev := cache
				cache, changed, err = cache.Assign(a.Epoch, a.StartOffset)
				if err != nil {
					t.Fatal(err)
				}
				if changed == prev.Equal(cache) {
					t.Fatalf("changed=%v but equal=%v", changed, prev.Equal(cache))
				}
			}
			if got := fmt.Sprint(cache.Entries()); got != fmt.Sprint(c.want) {
				t.Fatalf("got %s want %v", got, c.want)
			}
			if changed != c.changed {
				t.Fatalf("changed %v want %v", changed, c.changed)
			}
			if fmt.Sprint(mustEpochs(t, c.start...).Entries()) != fmt.Sprint(before) {
				t.Fatal("Assign mutated its receiver")
			}
		})
	}
	for _, bad := range []EpochEntry{e(-1, 0), e(0, -1)} {
		if _, _, err := (Epochs{}).Assign(bad.Epoch, bad.StartOffset); err == nil {
			t.Errorf("assign %v accepted", bad)
		}
	}
}

func TestTruncateFromEnd(t *testing.T) {
	base := []EpochEntry{e(2, 6), e(3, 8), e(4, 11)}
	cases := []struct {
		end  int64
		want []EpochEntry
	}{
		{9, []EpochEntry{e(2, 6), e(3, 8)}},
		{8, []EpochEntry{e(2, 6)}},
		{11, []EpochEntry{e(2, 6), e(3, 8)}},
		{12, base},
		{-1, base},
		{0, nil},
		{6, nil},
		{7, []EpochEntry{e(2, 6)}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.end), func(t *testing.T) {
			cache := mustEpochs(t, base...)
			got := cache.TruncateFromEnd(c.end)
			if fmt.Sprint(got.Entries()) != fmt.Sprint(mustEpochs(t, c.want...).Entries()) {
				t.Fatalf("truncateFromEnd(%d) = %v want %v", c.end, got, c.want)
			}
			if cache.Len() != 3 {
				t.Fatal("receiver mutated")
			}
		})
	}
}

func TestTruncateFromStart(t *testing.T) {
	base := []EpochEntry{e(2, 6), e(3, 8), e(4, 11)}
	cases := []struct {
		start int64
		want  []EpochEntry
	}{
		{9, []EpochEntry{e(3, 9), e(4, 11)}},
		{8, []EpochEntry{e(3, 8), e(4, 11)}},
		{6, base},
		{1, base},
		{11, []EpochEntry{e(4, 11)}},
		{15, []EpochEntry{e(4, 15)}},
		{-1, base},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.start), func(t *testing.T) {
			got := mustEpochs(t, base...).TruncateFromStart(c.start)
			if fmt.Sprint(got.Entries()) != fmt.Sprint(c.want) {
				t.Fatalf("truncateFromStart(%d) = %v want %v", c.start, got, c.want)
			}
		})
	}
	// shouldWriteCheckpointOnTruncation: end(11) then start(8) leaves [(3,8)].
	got := mustEpochs(t, base...).TruncateFromEnd(11).TruncateFromStart(8)
	if fmt.Sprint(got.Entries()) != fmt.Sprint([]EpochEntry{e(3, 8)}) {
		t.Fatalf("end(11)+start(8) = %v", got)
	}
}

func TestEpochForOffset(t *testing.T) {
	c := mustEpochs(t, e(0, 10), e(1, 20), e(5, 30))
	for _, tc := range []struct {
		off   int64
		epoch int32
		ok    bool
	}{{25, 1, true}, {30, 5, true}, {5, 0, false}, {10, 0, true}, {99, 5, true}} {
		ep, ok := c.EpochForOffset(tc.off)
		if ep != tc.epoch || ok != tc.ok {
			t.Errorf("epochForOffset(%d) = %d,%v want %d,%v", tc.off, ep, ok, tc.epoch, tc.ok)
		}
	}
}
