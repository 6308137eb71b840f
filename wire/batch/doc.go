// Package batch reads Kafka's record-batch format (magic 2): the 61-byte
// header, CRC-32C validation, attributes, and splitting a fetched byte run
// into whole batches while dropping a partial tail. It is pure (bytes in,
// values out) so that storage and the fetcher can share it.
//
// May import: the standard library only.
package batch
