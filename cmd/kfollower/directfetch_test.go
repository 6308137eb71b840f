package main

import "testing"

// The fetcher's own Fetch connections are configured as the client is:
// plaintext by default, with the client's TLS settings under --tls, and
// not at all under SASL, which they do not speak (the Fetches then go
// through the client's SASL connections).
func TestDirectFetchMirrorsClient(t *testing.T) {
	cfg := defaultConfig()
	df, err := directFetch(cfg)
	if err != nil || df == nil || df.TLS != nil || df.ClientID != "kfollower" {
		t.Fatalf("plaintext: %+v, %v; want a plaintext DirectFetch as client kfollower", df, err)
	}
	cfg.TLS, cfg.TLSServerName = true, "broker.example"
	if df, err = directFetch(cfg); err != nil || df == nil || df.TLS == nil || df.TLS.ServerName != "broker.example" {
		t.Fatalf("--tls: %+v, %v; want the client's TLS config", df, err)
	}
	cfg.SASLMechanism, cfg.SASLUser = "PLAIN", "u"
	if df, err = directFetch(cfg); err != nil || df != nil {
		t.Fatalf("SASL: %+v, %v; want none", df, err)
	}
}
