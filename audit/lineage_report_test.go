package audit

import (
	"testing"

	"github.com/kfollower/kfollower/storage"
)

func ee(epoch int32, start int64) storage.EpochEntry {
	return storage.EpochEntry{Epoch: epoch, StartOffset: start}
}

func le(epoch int32, start int64) Epoch { return Epoch{Epoch: epoch, StartOffset: start} }

func TestCompareEpochs(t *testing.T) {
	cases := []struct {
		name      string
		local     []storage.EpochEntry
		localEnd  int64
		leader    []Epoch
		leaderEnd int64
		want      int64 // parting offset, -1 for none
	}{
		{"empty local", nil, 0, []Epoch{le(0, 0)}, 10, -1},
		{"equal", []storage.EpochEntry{ee(0, 0), ee(2, 300)}, 500, []Epoch{le(0, 0), le(2, 300)}, 500, -1},
		{"prefix, leader further", []storage.EpochEntry{ee(0, 0)}, 300, []Epoch{le(0, 0), le(2, 300)}, 500, -1},
		{"unclean: local epoch 0 runs past the leader's", []storage.EpochEntry{ee(0, 0)}, 420, []Epoch{le(0, 0), le(2, 300)}, 500, 300},
		{"local epoch the leader never had", []storage.EpochEntry{ee(0, 0), ee(1, 300)}, 420, []Epoch{le(0, 0), le(2, 300)}, 500, 300},
		{"leader changed epoch earlier", []storage.EpochEntry{ee(0, 0), ee(2, 200)}, 420, []Epoch{le(0, 0), le(1, 100), le(2, 200)}, 500, 100},
		{"same epochs, other start", []storage.EpochEntry{ee(0, 0), ee(2, 250)}, 420, []Epoch{le(0, 0), le(2, 300)}, 500, 250},
		{"local past the leader's end", []storage.EpochEntry{ee(0, 0), ee(2, 300)}, 600, []Epoch{le(0, 0), le(2, 300)}, 500, 500},
		{"our log starts later", []storage.EpochEntry{ee(2, 350)}, 420, []Epoch{le(0, 0), le(2, 300)}, 500, -1},
		{"leader's log starts later (retention)", []storage.EpochEntry{ee(0, 0), ee(2, 300)}, 420, []Epoch{le(2, 350)}, 500, -1},
		{"old local epochs below the leader's start", []storage.EpochEntry{ee(0, 0), ee(1, 10), ee(2, 300)}, 420, []Epoch{le(2, 350)}, 500, -1},
		{"no leader epochs", []storage.EpochEntry{ee(0, 0)}, 10, nil, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := compareEpochs(tc.local, tc.localEnd, tc.leader, tc.leaderEnd)
			got := int64(-1)
			if p != nil {
				got = p.Offset
			}
			if got != tc.want {
				t.Fatalf("parting %+v, want offset %d", p, tc.want)
			}
		})
	}
}
