// Package testcert makes the certificates kfollower's tests serve and trust
// TLS with: a CA (NewCA), server certificates it signs for 127.0.0.1 and
// localhost (CA.Server), client certificates of a given subject
// (CA.Client), each as a tls.Certificate and as PEM. One package rather than
// a copy in each test file, so that every test's certificates are made the
// same way and a fix (a key type, a field a TLS stack insists on) is made
// once.
//
// Test-only: its functions fail the test they are given on any error, and
// layers_test.go keeps it out of every package's non-test files.
//
// May import: the standard library.
package testcert
