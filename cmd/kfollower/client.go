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
	"strings"
	"time"

	"github.com/kfollower/kfollower/fetcher"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// dialTimeout bounds a dial to a broker, the TLS handshake included, on
// the client's connections and on the fetcher's own alike.
const dialTimeout = 10 * time.Second

// clientOpts builds the kgo options for the cluster, reading and checking
// the TLS files first.
func clientOpts(cfg *config) ([]kgo.Opt, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Bootstrap...),
		kgo.ClientID("kfollower"),
		kgo.DialTimeout(dialTimeout),
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

// directFetch configures the fetcher's own Fetch connections
// (fetcher.Config.DirectFetch) to connect as clientOpts' client does: the
// same client id, dial timeout (dialTimeout, the TLS handshake included)
// and TLS. Nil under --fetch-connection client, and under SASL, which
// those connections do not speak (an explicit direct is refused by
// config.check): the Fetches then go through the client's connections,
// which is logged once.
func directFetch(cfg *config, logger *slog.Logger) (*fetcher.DirectFetch, error) {
	switch {
	case cfg.FetchConnection == "client":
		logger.Info("Fetches go through the franz-go client's connections", "fetch_connection", "client")
		return nil, nil
	case cfg.SASLMechanism != "none":
		logger.Info("Fetches go through the franz-go client's connections: kfollower's own speak no SASL",
			"fetch_connection", "client", "sasl_mechanism", cfg.SASLMechanism)
		return nil, nil
	}
	df := &fetcher.DirectFetch{ClientID: "kfollower", DialTimeout: dialTimeout}
	if cfg.tlsEnabled() {
		tc, err := tlsConfig(cfg)
		if err != nil {
			return nil, err
		}
		df.TLS = tc
	}
	return df, nil
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

// answerTimeout is how long a server that accepted our connection has to
// answer ApiVersions. A Kafka broker answers at once (it is the first
// request of every client, KIP-35); an HTTP server waits for a request
// line that never comes.
const answerTimeout = 5 * time.Second

// probeCluster sends ApiVersions to the bootstrap servers until one answers.
// Unreachable servers (refused, no route, a name that does not resolve)
// are retried with backoff and logged, and onWait told why; a server that
// accepts the connection but answers not as Kafka, or not within
// answerTimeout, is not a Kafka broker or refuses our TLS or SASL settings,
// which retrying will not fix.
func probeCluster(ctx context.Context, client *kgo.Client, bootstrap []string, logger *slog.Logger, onWait func(reason string)) error {
	backoff := 500 * time.Millisecond
	for attempt := 1; ; attempt++ {
		var unreachable, notKafka []string
		for i, b := range client.SeedBrokers() {
			addr := "?"
			if i < len(bootstrap) {
				addr = bootstrap[i]
			}
			// Our own dial first tells a server that is not there from
			// one that is there and silent: kgo's answer to both is a
			// deadline.
			if err := dialOnce(ctx, addr); err != nil {
				if ctx.Err() != nil {
					return nil // shutting down before we started
				}
				unreachable = append(unreachable, addr+": "+describeDialError(err))
				continue
			}
			rctx, cancel := context.WithTimeout(ctx, answerTimeout)
			_, err := b.Request(rctx, kmsg.NewPtrApiVersionsRequest())
			cancel()
			if err == nil {
				return nil
			}
			if ctx.Err() != nil {
				return nil
			}
			if isUnreachable(err) && !errors.Is(err, context.DeadlineExceeded) && !isReadTimeout(err) {
				// It went away between our dial and kgo's.
				unreachable = append(unreachable, addr+": "+describeDialError(err))
				continue
			}
			seen := err.Error()
			if errors.Is(err, context.DeadlineExceeded) || isReadTimeout(err) {
				seen = fmt.Sprintf("it accepted the TCP connection but sent no reply to ApiVersions within %v (an HTTP or other server waiting for its own protocol, a TLS port dialled without --tls, or a hung broker)", answerTimeout)
			}
			notKafka = append(notKafka, fmt.Sprintf("bootstrap server %s does not answer as a Kafka broker (wrong address or port, or TLS/SASL settings the broker refuses): %s", addr, seen))
		}
		if len(notKafka) > 0 {
			// Some server answered wrongly and none answered right.
			return errors.New(strings.Join(notKafka, "; "))
		}
		reason := strings.Join(unreachable, "; ")
		if onWait != nil {
			onWait("no bootstrap server reachable: " + reason)
		}
		logger.Warn("no bootstrap server reachable; retrying", "attempt", attempt, "retry_in", backoff, "err", reason)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// dialOnce opens and closes a TCP connection to addr, as kgo would dial it.
func dialOnce(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: 10 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}

// describeDialError says what failed to reach a server, naming a host name
// that does not resolve as such (a typo is the usual cause).
func describeDialError(err error) string {
	var de *net.DNSError
	if errors.As(err, &de) && de.IsNotFound {
		return fmt.Sprintf("no such host %q (the name does not resolve: a typo, or DNS not ready yet)", de.Name)
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" && oe.Err != nil {
		return oe.Err.Error() // "connect: connection refused"; the caller names the address
	}
	return err.Error()
}

// isReadTimeout reports a read that timed out on an open connection.
func isReadTimeout(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "read" && oe.Timeout()
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
