package lostfound

import (
	"bytes"
	"slices"
	"testing"

	"github.com/kfollower/kfollower/wire/batch"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// decideTransactions keeps plain records and committed transactions, drops
// aborted ones and holds back those whose outcome the lost range does not
// show.
func TestDecideTransactions(t *testing.T) {
	commit, abort := []byte{0, 0, 0, 1}, []byte{0, 0, 0, 0}
	raw := bytes.Join([][]byte{
		batch.Build(batch.Spec{BaseOffset: 0, Records: 2, Value: []byte("plain")}),
		batch.Build(batch.Spec{BaseOffset: 2, Records: 2, Transactional: true, ProducerID: 7, Value: []byte("committed")}),
		batch.Build(batch.Spec{BaseOffset: 4, Records: 3, Transactional: true, ProducerID: 8, Value: []byte("aborted")}),
		batch.Build(batch.Spec{BaseOffset: 7, Records: 1, Control: true, Transactional: true, ProducerID: 7, Key: commit}),
		batch.Build(batch.Spec{BaseOffset: 8, Records: 1, Control: true, Transactional: true, ProducerID: 8, Key: abort}),
		batch.Build(batch.Spec{BaseOffset: 9, Records: 2, Transactional: true, ProducerID: 9, Value: []byte("open")}),
		batch.Build(batch.Spec{BaseOffset: 11, Records: 1, Value: []byte("plain")}),
	}, nil)
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.RecordBatches = raw
	fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{KeepControlRecords: true, Topic: "t"}, &rp, kgo.DefaultDecompressor(), nil)
	if fp.Err != nil {
		t.Fatal(fp.Err)
	}
	d := decideTransactions(fp.Records)
	offs := func(rs []*kgo.Record) []int64 {
		var out []int64
		for _, r := range rs {
			out = append(out, r.Offset)
		}
		return out
	}
	if got := offs(d.keep); !slices.Equal(got, []int64{0, 1, 2, 3, 11}) {
		t.Errorf("keep %v", got)
	}
	if got := offs(d.keepWithUndecided); !slices.Equal(got, []int64{0, 1, 2, 3, 9, 10, 11}) {
		t.Errorf("keep with undecided %v", got)
	}
	if d.data != 10 || d.aborted != 3 || d.undecided != 2 {
		t.Errorf("counts data %d aborted %d undecided %d", d.data, d.aborted, d.undecided)
	}
}
