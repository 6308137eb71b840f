package kafka

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Security adds listeners to every broker beside PLAINTEXT, which the
// harness itself keeps using: an SSL listener and a SASL_PLAINTEXT listener
// offering SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN. It needs a cluster the
// harness starts.
type Security struct {
	// TLS, if set, adds the listener named SSL.
	TLS *TLSListener
	// SASL, if set, adds the listener named SASL_PLAINTEXT. SCRAM users are
	// created after start with Cluster.AddSCRAMUser.
	SASL *SASLListener
}

// TLSListener is the SSL listener's key material, PEM encoded.
type TLSListener struct {
	// CertPEM is the broker certificate chain, KeyPEM its unencrypted
	// PKCS#8 key ("BEGIN PRIVATE KEY"), as Kafka's PEM key store wants.
	CertPEM, KeyPEM []byte
	// ClientCAPEM, if set, makes the listener require client certificates
	// signed by it (ssl.client.auth=required).
	ClientCAPEM []byte
}

// SASLListener configures the SASL_PLAINTEXT listener.
type SASLListener struct {
	// PlainUsers are the PLAIN users, name → password.
	PlainUsers map[string]string
}

// extraPorts is how many listener ports each broker needs beyond PLAINTEXT.
func (s *Security) extraPorts() int {
	if s == nil {
		return 0
	}
	n := 0
	if s.TLS != nil {
		n++
	}
	if s.SASL != nil {
		n++
	}
	return n
}

// assignPorts gives a broker its extra listener ports.
func (s *Security) assignPorts(n *Node, next func() int) {
	if s == nil || !n.broker {
		return
	}
	if s.TLS != nil {
		n.SSLPort = next()
	}
	if s.SASL != nil {
		n.SASLPort = next()
	}
}

// apply adds the listeners to a broker's properties. Key material goes in
// inline (ssl.keystore.key, ssl.keystore.certificate.chain): a PEM key
// store file would demand an encrypted key.
func (s *Security) apply(n *Node, p map[string]string) {
	if s == nil || !n.broker {
		return
	}
	add := func(name string, port int) {
		l := fmt.Sprintf("%s://127.0.0.1:%d", name, port)
		p["listeners"] += "," + l
		p["advertised.listeners"] += "," + l
		p["listener.security.protocol.map"] += fmt.Sprintf(",%s:%s", name, name)
	}
	if t := s.TLS; t != nil {
		add("SSL", n.SSLPort)
		pre := "listener.name.ssl."
		p[pre+"ssl.keystore.type"] = "PEM"
		p[pre+"ssl.keystore.certificate.chain"] = propPEM(t.CertPEM)
		p[pre+"ssl.keystore.key"] = propPEM(t.KeyPEM)
		if len(t.ClientCAPEM) > 0 {
			p[pre+"ssl.client.auth"] = "required"
			p[pre+"ssl.truststore.type"] = "PEM"
			p[pre+"ssl.truststore.certificates"] = propPEM(t.ClientCAPEM)
		}
	}
	if sl := s.SASL; sl != nil {
		add("SASL_PLAINTEXT", n.SASLPort)
		pre := "listener.name.sasl_plaintext."
		p["sasl.enabled.mechanisms"] = "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN"
		p[pre+"scram-sha-256.sasl.jaas.config"] = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
		p[pre+"scram-sha-512.sasl.jaas.config"] = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
		var users strings.Builder
		for u, pw := range sl.PlainUsers {
			fmt.Fprintf(&users, " user_%s=%q", u, pw)
		}
		p[pre+"plain.sasl.jaas.config"] = "org.apache.kafka.common.security.plain.PlainLoginModule required" + users.String() + ";"
	}
}

// propPEM writes PEM as one properties value: Properties.load turns the
// \n escapes back into newlines.
func propPEM(b []byte) string {
	return strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", `\n`)
}

// SSLBootstrap lists the brokers' SSL listeners.
func (c *Cluster) SSLBootstrap() []string {
	c.t.Helper()
	c.needFaults("SSLBootstrap")
	return c.listeners("no SSL listener (set Options.Security.TLS)", func(n *Node) int { return n.SSLPort })
}

// SASLBootstrap lists the brokers' SASL_PLAINTEXT listeners.
func (c *Cluster) SASLBootstrap() []string {
	c.t.Helper()
	c.needFaults("SASLBootstrap")
	return c.listeners("no SASL listener (set Options.Security.SASL)", func(n *Node) int { return n.SASLPort })
}

// listeners lists every broker's address on the listener port gives,
// failing the test, with missing, for a broker that has none.
func (c *Cluster) listeners(missing string, port func(*Node) int) []string {
	c.t.Helper()
	var addrs []string
	for _, n := range c.Brokers() {
		p := port(n)
		if p == 0 {
			c.t.Fatalf("broker %d has %s", n.ID, missing)
		}
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", p))
	}
	return addrs
}

// AddSCRAMUser creates or updates a SCRAM credential (mechanism
// "SCRAM-SHA-256" or "SCRAM-SHA-512") and waits until every broker's SASL
// listener accepts it: credentials reach the brokers through the metadata
// log, not at once.
func (c *Cluster) AddSCRAMUser(ctx context.Context, mechanism, user, password string) {
	c.t.Helper()
	mech, auth := kadm.ScramSha256, scram.Auth{User: user, Pass: password}.AsSha256Mechanism()
	switch mechanism {
	case "SCRAM-SHA-256":
	case "SCRAM-SHA-512":
		mech, auth = kadm.ScramSha512, scram.Auth{User: user, Pass: password}.AsSha512Mechanism()
	default:
		c.t.Fatalf("AddSCRAMUser: unknown mechanism %q", mechanism)
	}
	res, err := c.Admin().AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: mech, Iterations: 4096, Password: password}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		c.t.Fatalf("creating SCRAM user %s (%s): %v", user, mechanism, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for _, addr := range c.SASLBootstrap() {
		var last error
		for {
			last = saslPing(ctx, addr, kgo.SASL(auth))
			if last == nil {
				break
			}
			select {
			case <-ctx.Done():
				c.t.Fatalf("SCRAM user %s not accepted by %s: %v (last: %v)", user, addr, ctx.Err(), last)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}

// saslPing authenticates to exactly addr and asks for ApiVersions.
func saslPing(ctx context.Context, addr string, opt kgo.Opt) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0), opt)
	if err != nil {
		return err
	}
	defer cl.Close()
	seeds := cl.SeedBrokers()
	if len(seeds) != 1 {
		return errors.New("no seed broker")
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = seeds[0].Request(rctx, kmsg.NewPtrApiVersionsRequest())
	return err
}
