// Package metrics builds kfollower's Prometheus collectors: event counters and
// histograms, and per-partition series built at scrape time from snapshots, so
// a partition that goes away leaves no stale series. It uses no global
// registry; the caller passes a prometheus.Registerer.
//
// May import: client_golang only.
package metrics
