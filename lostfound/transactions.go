package lostfound

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kgo"
)

// txnDecision sorts lost records by what their transaction did.
type txnDecision struct {
	keep              []*kgo.Record // non-transactional, or committed in the lost range
	keepWithUndecided []*kgo.Record // keep plus the undecided, in offset order
	data              int           // data records (not control)
	aborted           int
	undecided         int
}

// decideTransactions follows each producer's transaction through the lost
// records: transactional records wait for their producer's next control
// record (a commit or abort marker, key = version int16, type int16 with
// 0 = abort, 1 = commit: ControlRecordType.java); at the end, records
// still waiting are undecided. Order is kept: a committed transaction's
// records stay where they were written.
func decideTransactions(recs []*kgo.Record) txnDecision {
	const (
		pending = iota
		keep
		drop
	)
	state := make([]int, len(recs))
	waiting := map[int64][]int{}
	var d txnDecision
	for i, r := range recs {
		switch {
		case r.Attrs.IsControl():
			state[i] = drop
			commit := len(r.Key) >= 4 && binary.BigEndian.Uint16(r.Key[2:4]) == 1
			for _, j := range waiting[r.ProducerID] {
				if commit {
					state[j] = keep
				} else {
					state[j] = drop
					d.aborted++
				}
			}
			delete(waiting, r.ProducerID)
		case r.Attrs.IsTransactional():
			d.data++
			waiting[r.ProducerID] = append(waiting[r.ProducerID], i)
		default:
			d.data++
			state[i] = keep
		}
	}
	for i, r := range recs {
		switch {
		case state[i] == keep:
			d.keep = append(d.keep, r)
			d.keepWithUndecided = append(d.keepWithUndecided, r)
		case state[i] == pending && !r.Attrs.IsControl():
			d.undecided++
			d.keepWithUndecided = append(d.keepWithUndecided, r)
		}
	}
	return d
}
