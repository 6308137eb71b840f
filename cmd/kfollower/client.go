package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// clientOpts builds the kgo options for the cluster, reading and checking
// the TLS files first.
func clientOpts(cfg *config) ([]kgo.Opt, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Bootstrap...),
		kgo.ClientID("kfollower"),
		kgo.DialTimeout(10 * time.Second),
		// The fetcher asks for metadata on its own schedule and on leader
		// moves; let those asks through rather than serving a cached copy.
		kgo.MetadataMinAge(250 * time.Millisecond),
	}
	if !cfg.tlsEnabled() {
		return opts, nil
	}
	tc, err := tlsConfig(cfg)
	if err != nil {
		return nil, err
	}
	return append(opts, kgo.DialTLSConfig(tc)), nil
}

func tlsConfig(cfg *config) (*tls.Config, error) {
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         cfg.TLSServerName,
		InsecureSkipVerify: cfg.TLSInsecureSkip, //nolint:gosec // asked for explicitly, for tests
	}
	if cfg.TLSCA != "" {
		pem, err := os.ReadFile(cfg.TLSCA)
		if err != nil {
			return nil, fmt.Errorf("reading --tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in it", cfg.TLSCA)
		}
		tc.RootCAs = pool
	}
	if cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("loading --tls-cert %s and --tls-key %s: %w", cfg.TLSCert, cfg.TLSKey, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

func saslOpt(mechanism, user, password string) kgo.Opt {
	var m sasl.Mechanism
	switch mechanism {
	case "PLAIN":
		m = plain.Auth{User: user, Pass: password}.AsMechanism()
	case "SCRAM-SHA-256":
		m = scram.Auth{User: user, Pass: password}.AsSha256Mechanism()
	default:
		m = scram.Auth{User: user, Pass: password}.AsSha512Mechanism()
	}
	return kgo.SASL(m)
}

// probeCluster sends ApiVersions to the bootstrap servers until one answers.
// Unreachable servers are retried with backoff and logged; any other
// failure means the address is not a Kafka broker or refuses our TLS or SASL
// settings, which retrying will not fix.
func probeCluster(ctx context.Context, client *kgo.Client, bootstrap []string, logger *slog.Logger) error {
	backoff := 500 * time.Millisecond
	for attempt := 1; ; attempt++ {
		var unreachable []error
		for i, b := range client.SeedBrokers() {
			rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			_, err := b.Request(rctx, kmsg.NewPtrApiVersionsRequest())
			cancel()
			if err == nil {
				return nil
			}
			if ctx.Err() != nil {
				return nil // shutting down before we started
			}
			addr := "?"
			if i < len(bootstrap) {
				addr = bootstrap[i]
			}
			if !isUnreachable(err) {
				return fmt.Errorf("bootstrap server %s does not answer as a Kafka broker (wrong address or port, or TLS/SASL settings the broker refuses): %w", addr, err)
			}
			unreachable = append(unreachable, fmt.Errorf("%s: %w", addr, err))
		}
		logger.Warn("no bootstrap server reachable; retrying", "attempt", attempt, "retry_in", backoff, "err", errors.Join(unreachable...))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// isUnreachable reports a network failure to reach a server, as opposed to
// a server that answered wrongly.
func isUnreachable(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}
