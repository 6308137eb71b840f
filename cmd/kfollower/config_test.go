package main

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// Flags win over KFOLLOWER_* variables, which win over the file, which wins
// over the defaults; lists come from YAML sequences or comma lists.
func TestConfigPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "kfollower.yaml")
	yaml := `bootstrap-servers: [file-1:9092, file-2:9092]
topics: [from-file, "logs-.*"]
data-dir: /from/file
flush: os
fetch-connection: client
flush-interval: 3s
retention-bytes: 10GiB
log-format: json
`
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"KFOLLOWER_CONFIG":         file,
		"KFOLLOWER_DATA_DIR":       "/from/env",
		"KFOLLOWER_FLUSH_INTERVAL": "5s",
		"KFOLLOWER_LOG_FORMAT":     "text",
	}
	cfg, err := loadConfig([]string{"--log-format", "json", "--flush-interval=7s"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Bootstrap, []string{"file-1:9092", "file-2:9092"}) || !slices.Equal(cfg.Topics, []string{"from-file", "logs-.*"}) {
		t.Errorf("from the file: bootstrap %q topics %q", cfg.Bootstrap, cfg.Topics)
	}
	if cfg.Flush != "os" || cfg.RetentionBytes != 10<<30 || cfg.FetchConnection != "client" {
		t.Errorf("from the file: flush %q retention %d fetch connection %q", cfg.Flush, cfg.RetentionBytes, cfg.FetchConnection)
	}
	if cfg.DataDir != "/from/env" {
		t.Errorf("env over file: data dir %q", cfg.DataDir)
	}
	if cfg.FlushInterval != 7*time.Second || cfg.LogFormat != "json" {
		t.Errorf("flags over env: flush interval %v, log format %q", cfg.FlushInterval, cfg.LogFormat)
	}
	if cfg.HTTP != ":7644" || cfg.MetadataInterval != 5*time.Second {
		t.Errorf("defaults: http %q metadata interval %v", cfg.HTTP, cfg.MetadataInterval)
	}
	if err := cfg.check(); err != nil {
		t.Errorf("check: %v", err)
	}
}

func TestTopicMatcher(t *testing.T) {
	m, err := topicMatcher([]string{"orders", "logs-.*", "a.b"})
	if err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]bool{
		"orders": true, "orders2": false, "logs-": true, "logs-app": true, "xlogs-app": false,
		"a.b": true, "axb": false, // a plain name: its dot is literal
	} {
		if got := m(topic); got != want {
			t.Errorf("%q: %v, want %v", topic, got, want)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1024": 1024, "4MiB": 4 << 20, "10GiB": 10 << 30, "1GB": 1e9, "-1": -1, "512 KiB": 512 << 10} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := parseSize("lots"); err == nil {
		t.Error("parseSize(lots) did not fail")
	}
}
