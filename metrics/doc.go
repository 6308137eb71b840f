// Package metrics builds kfollower's Prometheus collectors: event counters and
// histograms, and per-partition series built at scrape time from snapshots, so
// a partition that goes away leaves no stale series. It uses no global
// registry; the caller passes a prometheus.Registerer.
//
// NewFetcherObserver turns what the fetcher reports into those counters
// and histograms, so the fetcher never imports metrics. NewServeObserver
// does the same for the served endpoint (wire/server's Observer): the
// kfollower_serve_* series.
//
// May import: client_golang, and the packages whose types the observers
// are handed (fetcher, follower, wire, kmsg; wire/server and authz).
package metrics
