package main

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// The fetcher's own Fetch connections are configured as the client is:
// plaintext by default, with the client's TLS settings under --tls, and
// not at all under SASL, which they do not speak (the Fetches then go
// through the client's SASL connections), nor under --fetch-connection
// client; either fallback is logged once, at Info.
func TestDirectFetchMirrorsClient(t *testing.T) {
	var log bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	cfg := defaultConfig()
	df, err := directFetch(cfg, logger)
	if err != nil || df == nil || df.TLS != nil || df.ClientID != "kfollower" {
		t.Fatalf("plaintext: %+v, %v; want a plaintext DirectFetch as client kfollower", df, err)
	}
	cfg.TLS, cfg.TLSServerName = true, "broker.example"
	if df, err = directFetch(cfg, logger); err != nil || df == nil || df.TLS == nil || df.TLS.ServerName != "broker.example" {
		t.Fatalf("--tls: %+v, %v; want the client's TLS config", df, err)
	}
	if log.Len() != 0 {
		t.Errorf("direct connections logged %q; want nothing", log.String())
	}
	cfg.SASLMechanism, cfg.SASLUser = "PLAIN", "u"
	if df, err = directFetch(cfg, logger); err != nil || df != nil {
		t.Fatalf("SASL: %+v, %v; want none", df, err)
	}
	if l := log.String(); strings.Count(l, "\n") != 1 || !strings.Contains(l, "level=INFO") || !strings.Contains(l, "speak no SASL") {
		t.Errorf("SASL: logged %q; want one Info line saying why", l)
	}
	cfg = defaultConfig()
	cfg.FetchConnection = "client"
	if df, err = directFetch(cfg, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil || df != nil {
		t.Fatalf("--fetch-connection client: %+v, %v; want none", df, err)
	}
}

// --fetch-connection direct given explicitly (flag, environment or file)
// under SASL is refused at start, saying why; the default under SASL is
// not (it falls back to the client), nor client under SASL.
func TestFetchConnectionUnderSASL(t *testing.T) {
	sasl := []string{"--bootstrap-servers", "b:9092", "--topics", "t", "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", "u"}
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr bool
	}{
		{"default", sasl, nil, false},
		{"client", append(sasl, "--fetch-connection", "client"), nil, false},
		{"direct flag", append(sasl, "--fetch-connection", "direct"), nil, true},
		{"direct env", sasl, map[string]string{"KFOLLOWER_FETCH_CONNECTION": "DIRECT"}, true},
		{"no SASL, direct", []string{"--bootstrap-servers", "b:9092", "--topics", "t", "--fetch-connection", "direct"}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := loadConfig(tc.args, func(k string) string { return tc.env[k] }, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			err = cfg.check()
			if got := err != nil; got != tc.wantErr {
				t.Fatalf("check: %v; want an error: %v", err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "--fetch-connection direct cannot be used with --sasl-mechanism SCRAM-SHA-512: kfollower's own Fetch connections speak no SASL") {
				t.Errorf("check: %v; want it to say why", err)
			}
		})
	}
}
