// Package metrics builds kfollower's Prometheus collectors: event counters and
// histograms, and per-partition series built at scrape time from snapshots, so
// a partition that goes away leaves no stale series. It uses no global
// registry; the caller passes a prometheus.Registerer.
//
// NewFetcherObserver turns what the fetcher reports into those counters
// and histograms, so the fetcher never imports metrics.
//
// May import: client_golang, and the packages whose types the fetcher's
// observer hands over (fetcher, follower, wire, kmsg).
package metrics
