package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/kfollower/kfollower/fetcher"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

// dropPrefix gathers g without the families whose names start with prefix.
type dropPrefix struct {
	g      prometheus.Gatherer
	prefix string
}

func (d dropPrefix) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := d.g.Gather()
	out := mfs[:0]
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), d.prefix) {
			out = append(out, mf)
		}
	}
	return out, err
}

// statusDoc is the /status document.
type statusDoc struct {
	Time       time.Time        `json:"time"`
	Ready      bool             `json:"ready"`
	Partitions []fetcher.Status `json:"partitions"`
	// Serve is the --serve endpoint, if any.
	Serve *serveStatus `json:"serve,omitempty"`
}

func newMux(g prometheus.Gatherer, mgr *fetcher.Manager, serve func() *serveStatus) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !mgr.Ready() {
			http.Error(w, "not ready: metadata not loaded yet, a followed partition has not reconciled with its leader yet, or one is stopped, failed or waiting on its storage (see /status)\n", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		doc := statusDoc{Time: time.Now().UTC(), Ready: mgr.Ready(), Partitions: mgr.Statuses(), Serve: serve()}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(doc)
	})
	return mux
}
