// Package servecat serves what a fetcher.Manager follows: the one
// adapter between the fetcher's catalog (Manager.CatalogTopics and
// CatalogPartition) and the read-only server (server.Catalog) and the
// group forwarder (groups.Catalog), used alike by `kfollower run
// --serve`, the integration tests and the benchmarks.
//
// May import: the standard library, fetcher and wire/server. It reads the
// fetcher's logs only through the Manager's catalog (storage.Reader), as
// the server does.
package servecat
