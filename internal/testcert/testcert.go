package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"
)

// CA is a certificate authority of the test's own.
type CA struct {
	Cert *x509.Certificate
	Pool *x509.CertPool // trusts this CA alone
	PEM  []byte         // Cert, PEM encoded
	key  *ecdsa.PrivateKey
}

// Cert is a certificate a CA signed and its key.
type Cert struct {
	TLS     tls.Certificate // the certificate alone (no chain) and its key
	CertPEM []byte
	// KeyPEM is the key as unencrypted PKCS#8 ("PRIVATE KEY"), the one
	// form both Go's tls.X509KeyPair and Kafka's PEM key stores (KIP-651)
	// read.
	KeyPEM []byte
}

// validity is each certificate's: from an hour ago, against clock skew
// between the certificate's making and a TLS stack's check, to a day on.
func validity() (notBefore, notAfter time.Time) {
	now := time.Now()
	return now.Add(-time.Hour), now.Add(24 * time.Hour)
}

// serial is a random 127-bit serial number: two certificates of one CA
// never share one, which some TLS stacks refuse.
func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatalf("testcert: serial number: %v", err)
	}
	return n
}

// NewCA is a new self-signed CA named name (its subject's common name),
// with an ECDSA P-256 key.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testcert: CA %q key: %v", name, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t), Subject: pkix.Name{CommonName: name},
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	tmpl.NotBefore, tmpl.NotAfter = validity()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("testcert: CA %q: %v", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("testcert: CA %q: %v", name, err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{Cert: cert, Pool: pool, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key}
}

// Server is a server certificate for 127.0.0.1 and localhost, as a test's
// listeners are dialled: a client verifies the address against these
// subject alternative names, not the common name (RFC 6125; Go and Java
// alike).
func (ca *CA) Server(t testing.TB) *Cert {
	t.Helper()
	return ca.issue(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "127.0.0.1"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:    []string{"localhost"},
	})
}

// Client is a client certificate for subject, as it is to be mapped to a
// principal (its distinguished name is subject's, nothing added).
func (ca *CA) Client(t testing.TB, subject pkix.Name) *Cert {
	t.Helper()
	return ca.issue(t, &x509.Certificate{
		Subject:     subject,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// issue signs tmpl, given its subject, usage and names, with a new ECDSA
// P-256 key.
func (ca *CA) issue(t testing.TB, tmpl *x509.Certificate) *Cert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testcert: key for %s: %v", tmpl.Subject, err)
	}
	tmpl.SerialNumber, tmpl.KeyUsage = serial(t), x509.KeyUsageDigitalSignature
	tmpl.NotBefore, tmpl.NotAfter = validity()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("testcert: certificate for %s: %v", tmpl.Subject, err)
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("testcert: key for %s: %v", tmpl.Subject, err)
	}
	return &Cert{
		TLS:     tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk}),
	}
}
