// Package storage keeps a followed partition on disk exactly as Kafka lays out
// its own: <topic>-<partition>/ directories with 20-digit base-offset .log
// segments holding the fetched record batches unchanged, .index and .timeindex
// files, leader-epoch-checkpoint and partition.metadata.
//
// May import: the standard library and wire/batch (the record-batch format).
// It never imports follower; it satisfies follower's read-only log view.
package storage
