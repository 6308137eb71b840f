package testcert

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"testing"
)

// handshake runs a TLS handshake between server and client over a
// loopback TCP connection (buffered, where a net.Pipe would leave both
// sides blocked writing when one fails and sends its alert) and returns
// the client certificate the server verified, if any, and each side's
// error.
func handshake(t *testing.T, server, client *tls.Config) (peer *x509.Certificate, serverErr, clientErr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		err  error
		peer *x509.Certificate
	}
	done := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer c.Close() // a failed side ends the other's handshake too
		srv := tls.Server(c, server)
		r := result{err: srv.Handshake()}
		if pc := srv.ConnectionState().PeerCertificates; r.err == nil && len(pc) > 0 {
			r.peer = pc[0]
		}
		done <- r
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	tc := tls.Client(c, client)
	clientErr = tc.Handshake()
	if clientErr == nil {
		// Under TLS 1.3 the client is done before the server has
		// checked its certificate; a read waits for the server's
		// verdict (an alert, or the close after its handshake).
		_, _ = tc.Read(make([]byte, 1))
	}
	c.Close()
	r := <-done
	return r.peer, r.err, clientErr
}

// A server certificate is trusted through its CA's pool for 127.0.0.1 and
// localhost, and not through another CA's, nor for another name.
func TestServer(t *testing.T) {
	ca, other := NewCA(t, "test CA"), NewCA(t, "another CA")
	srv := ca.Server(t)
	serve := &tls.Config{Certificates: []tls.Certificate{srv.TLS}}
	for _, c := range []struct {
		name    string
		trusted *CA
		ok      bool
	}{
		{"127.0.0.1", ca, true}, {"localhost", ca, true},
		{"127.0.0.1", other, false}, {"example.com", ca, false}, {"127.0.0.2", ca, false},
	} {
		_, _, err := handshake(t, serve, &tls.Config{ServerName: c.name, RootCAs: c.trusted.Pool})
		if ok := err == nil; ok != c.ok {
			t.Errorf("dialling %s, trusting %s: handshake error %v, want success %v", c.name, c.trusted.Cert.Subject, err, c.ok)
		}
	}
}

// A client certificate passes a server that requires one its CA signed,
// with the subject it was given; one of another CA is refused.
func TestClient(t *testing.T) {
	ca, other := NewCA(t, "test CA"), NewCA(t, "another CA")
	serve := &tls.Config{Certificates: []tls.Certificate{ca.Server(t).TLS}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool}
	subject := pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"readers"}}
	alice := ca.Client(t, subject)
	peer, srvErr, cliErr := handshake(t, serve, &tls.Config{ServerName: "127.0.0.1", RootCAs: ca.Pool, Certificates: []tls.Certificate{alice.TLS}})
	if srvErr != nil || cliErr != nil {
		t.Fatalf("a client certificate of the server's CA: server %v, client %v", srvErr, cliErr)
	}
	// The distinguished name a principal mapping rule sees, nothing added.
	if got := peer.Subject.String(); got != "CN=alice,OU=readers" {
		t.Errorf("the server saw subject %q, want CN=alice,OU=readers", got)
	}
	stranger := other.Client(t, subject)
	if _, srvErr, _ := handshake(t, serve, &tls.Config{ServerName: "127.0.0.1", RootCAs: ca.Pool, Certificates: []tls.Certificate{stranger.TLS}}); srvErr == nil {
		t.Error("the server accepted a client certificate of another CA")
	}
}

// The PEM forms are the same certificates and keys: a CA's PEM is its
// certificate, a Cert's PEM pair loads (tls.X509KeyPair) to its
// tls.Certificate, its key as unencrypted PKCS#8.
func TestPEM(t *testing.T) {
	ca := NewCA(t, "test CA")
	b, rest := pem.Decode(ca.PEM)
	if b == nil || b.Type != "CERTIFICATE" || !bytes.Equal(b.Bytes, ca.Cert.Raw) || len(rest) != 0 {
		t.Fatalf("the CA's PEM is not its certificate alone: %q", ca.PEM)
	}
	for name, c := range map[string]*Cert{"server": ca.Server(t), "client": ca.Client(t, pkix.Name{CommonName: "kfollower"})} {
		pair, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(pair.Certificate) != 1 || !bytes.Equal(pair.Certificate[0], c.TLS.Certificate[0]) {
			t.Errorf("%s: CertPEM is not the tls.Certificate's certificate", name)
		}
		if b, _ := pem.Decode(c.KeyPEM); b == nil || b.Type != "PRIVATE KEY" {
			t.Errorf("%s: the key is not a PKCS#8 PRIVATE KEY block", name)
		} else if _, err := x509.ParsePKCS8PrivateKey(b.Bytes); err != nil {
			t.Errorf("%s: the key is not PKCS#8: %v", name, err)
		}
	}
}

// Two certificates of one CA never share a serial number.
func TestSerials(t *testing.T) {
	ca := NewCA(t, "test CA")
	seen := map[string]bool{ca.Cert.SerialNumber.String(): true}
	for range 20 {
		leaf, err := x509.ParseCertificate(ca.Server(t).TLS.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		s := leaf.SerialNumber.String()
		if seen[s] {
			t.Fatalf("serial %s issued twice", s)
		}
		seen[s] = true
	}
}
