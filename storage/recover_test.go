package storage

import (
	"errors"
	"fmt"
	"testing"
)

// Open writes the recovery point only after leader-epoch-checkpoint holds
// the epochs of the batches it covers: a point promises that, since the
// next Open reads no epochs back from before it. Here an append in a new
// epoch died before its checkpoint write, and the Open that recovers it
// dies writing the checkpoint; the Open after must still find the epoch.
// (The power-loss model found this: a recovery point written first left a
// batch of epoch 4 with no epoch 4 in the cache.)
func TestRecoveryPointAfterCheckpoint(t *testing.T) {
	data := t.TempDir()
	dir, _ := populate(t, data)
	logs := segFiles(t, dir, logSuffix)
	appendFile(t, logs[len(logs)-1], build(90, 4, 3)) // the append; its checkpoint never written
	ffs := &faultFS{writeMatch: EpochCheckpointFile}
	if l, err := openLog(ffs, data, "t", 0, corruptOpts(quiet)); !errors.Is(err, errInjected) {
		if l != nil {
			l.Close()
		}
		t.Fatalf("first Open: %v, want the injected checkpoint failure", err)
	}
	l := openT(t, data, corruptOpts(quiet))
	if got := fmt.Sprint(l.Epochs().Entries()); l.LogEndOffset() != 93 || got != "[{0 0} {1 24} {2 48} {3 72} {4 90}]" {
		t.Fatalf("log end %d, epochs %s: epoch 4 of the batch at 90 is lost", l.LogEndOffset(), got)
	}
	checkBatches(t, l, false)
}
