package main

import (
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"testing"

	"github.com/kfollower/kfollower/internal/testcert"
)

// testPKI is a CA with a server certificate for 127.0.0.1 and localhost
// and a client certificate (CN=kfollower), all PEM encoded; keys are
// unencrypted PKCS#8.
type testPKI struct {
	CAPEM                         []byte
	ServerCertPEM, ServerKeyPEM   []byte
	ClientCertPEM, ClientKeyPEM   []byte
	CAFile, ClientCert, ClientKey string // the same, written to files
	OtherCAFile                   string // a CA that signed nothing here
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	ca, other := testcert.NewCA(t, "kfollower test CA"), testcert.NewCA(t, "another CA")
	srv, cli := ca.Server(t), ca.Client(t, pkix.Name{CommonName: "kfollower"})
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return &testPKI{
		CAPEM: ca.PEM, ServerCertPEM: srv.CertPEM, ServerKeyPEM: srv.KeyPEM, ClientCertPEM: cli.CertPEM, ClientKeyPEM: cli.KeyPEM,
		CAFile: write("ca.pem", ca.PEM), ClientCert: write("client.pem", cli.CertPEM), ClientKey: write("client.key", cli.KeyPEM),
		OtherCAFile: write("other-ca.pem", other.PEM),
	}
}
