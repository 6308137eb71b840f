// Package fetcher is kfollower's I/O driver. One goroutine per leader broker
// owns that broker's partitions: it batches their OffsetsForLeaderEpoch and
// Fetch requests (a Fetch and an epoch query may be in the air at once,
// each partition's own one at a time), feeds the replies to the follower
// state machines, and
// carries out the storage actions they decide, in order. Partitions move
// between broker goroutines by hand-off, never through shared locks. What
// it does is reported to Config.Observers (the Observer interface), which
// metrics implements. The open logs are also listed read-only, for a
// server of the copy (CatalogTopics, CatalogPartition), and Config.Changed
// is told whenever what a reader of one may see has changed. Under
// storage.FlushInterval one more goroutine, the flusher, fsyncs the logs
// beside the broker goroutines, so a Fetch never waits on an fsync. With
// Config.DirectFetch each broker goroutine sends its Fetches on a
// wire.FetchConn of its own (direct.go), stages each partition's batches
// into its log as they are read (worker.stageSink, storage.Log.Stage), and
// releases each response's buffer once its records are appended
// (worker.held).
//
// May import: follower, storage, wire, wire/batch and franz-go (kgo, kmsg,
// kerr), plus the standard library; never metrics, which observes it.
package fetcher
