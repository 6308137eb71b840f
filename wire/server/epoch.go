package server

import "github.com/twmb/franz-go/pkg/kerr"

// partition is one served partition as a request finds it.
type partition struct {
	log Log
	// epoch is the served leader epoch: the Catalog's, raised to the log's
	// latest epoch if the Catalog were ever behind it, so that no batch
	// served carries an epoch above the one Metadata names.
	epoch int32
}

// lookup finds a served partition; ok is false when the Catalog does not
// serve it.
func (s *Server) lookup(topic string, p int32) (partition, bool) {
	l, served, ok := s.cfg.Catalog.Partition(topic, p)
	if !ok || l == nil {
		return partition{}, false
	}
	if latest, ok := l.LatestEpoch(); ok && latest > served {
		served = latest
	}
	return partition{l, served}, true
}

// fence is Partition.checkCurrentLeaderEpoch (KIP-320, docs/kafka.md
// §6.1): a request naming an older epoch than the served one is
// FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH; absent, no check.
func (p partition) fence(current int32, present bool) *kerr.Error {
	switch {
	case !present || current == p.epoch:
		return nil
	case current < p.epoch:
		return kerr.FencedLeaderEpoch
	default:
		return kerr.UnknownLeaderEpoch
	}
}

// endOffsetFor is LeaderEpochFileCache.endOffsetFor(epoch, log end) over
// the log's cache plus the entry (served epoch, log end) when the served
// epoch is above the cache's latest: the entry Partition.makeLeader
// assigns before a new leader writes anything (docs/kafka.md §2.6, §3.1).
// It is never stored: it floats at the log end until a batch of the
// served epoch arrives and the cache holds it. So a reader whose last
// epoch this copy lost is told where this copy's history of it ends.
func (p partition) endOffsetFor(epoch int32) (int32, int64) {
	if epoch < 0 {
		return -1, -1
	}
	latest, cached := p.log.LatestEpoch()
	if cached && p.epoch <= latest {
		return p.log.EndOffsetForEpoch(epoch)
	}
	// The served epoch is the newest entry, starting at the log end.
	switch {
	case epoch == p.epoch:
		return epoch, p.log.LogEndOffset()
	case epoch > p.epoch:
		return -1, -1
	case !cached:
		// Below the only entry: (requested, start of the first entry).
		return epoch, p.log.LogEndOffset()
	case epoch > latest:
		// Between the cache's latest and the served epoch: the floor is
		// the latest, which ends where the served epoch starts.
		return latest, p.log.LogEndOffset()
	default:
		// At or below the cache's latest: the cache answers, its latest
		// ending at the log end either way.
		return p.log.EndOffsetForEpoch(epoch)
	}
}
