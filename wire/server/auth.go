package server

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"

	"github.com/kfollower/kfollower/authz"
)

// authState is where a connection is in authenticating, as
// SaslServerAuthenticator's SaslState.
type authState int8

const (
	// authDone: authenticated, or nothing to authenticate; every request
	// is taken.
	authDone authState = iota
	// authHandshake: SASL is required and no SaslHandshake has been
	// taken; only ApiVersions and SaslHandshake are.
	authHandshake
	// authExchange: after SaslHandshake v1, only SaslAuthenticate.
	authExchange
	// authRawTokens: after SaslHandshake v0, the frames are bare SASL
	// tokens without a request header.
	authRawTokens
)

// Errors that close a connection while it authenticates.
var (
	// errBeforeAuth is a request other than ApiVersions and the SASL keys
	// before authentication: Kafka's IllegalSaslStateException
	// ("Unexpected Kafka request of type ... during SASL handshake").
	errBeforeAuth = errors.New("request before SASL authentication")
	errAuthFailed = errors.New("authentication failed")
	errTLS        = errors.New("TLS handshake")
)

// start runs the TLS handshake, if any, and sets the principal from the
// client certificate; then, with SASL, the connection waits for its
// handshake.
func (cc *conn) start(ctx context.Context) error {
	cfg := &cc.s.cfg
	if cfg.SASL != nil {
		cc.auth = authHandshake
	}
	if cfg.TLS == nil {
		return nil
	}
	tc := tls.Server(cc.c, cfg.TLS)
	cc.c = tc
	hctx, cancel := context.WithTimeout(ctx, cfg.IdleTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if hctx.Err() != nil {
			return fmt.Errorf("%w: no handshake within %v: %w", errTLS, cfg.IdleTimeout, timeoutError{})
		}
		return fmt.Errorf("%w: %v", errTLS, err)
	}
	certs := tc.ConnectionState().PeerCertificates
	if len(certs) == 0 || cfg.SASL != nil {
		return nil // SASL_SSL: the principal is SASL's
	}
	p, err := authz.User(certs[0].Subject.String()), error(nil)
	if cfg.CertPrincipal != nil {
		p, err = cfg.CertPrincipal(certs[0])
	}
	if err != nil {
		cc.s.obs.Authenticated("TLS", false)
		cc.s.audit.write(slog.LevelWarn, "authentication failed", "remote", cc.remote, "mechanism", "TLS", "subject", certs[0].Subject.String(), "err", err)
		return fmt.Errorf("%w: client certificate %q: %v", errAuthFailed, certs[0].Subject.String(), err)
	}
	cc.principal = p
	cc.s.obs.Authenticated("TLS", true)
	cc.s.audit.write(slog.LevelInfo, "authenticated", "remote", cc.remote, "mechanism", "TLS", "principal", p)
	return nil
}

// timeoutError marks a deadline as a net.Error timeout, for badInput.
type timeoutError struct{}

func (timeoutError) Error() string   { return "timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// SASL keys.
const (
	saslHandshakeKey    = 17
	saslAuthenticateKey = 36
)

// mayAsk refuses, before the frame is parsed, a key the connection's
// state does not take (SaslServerAuthenticator.handleKafkaRequest checks
// the key before it parses the body).
func (cc *conn) mayAsk(frame []byte) error {
	if cc.auth == authDone || len(frame) < 2 {
		return nil
	}
	key := int16(binary.BigEndian.Uint16(frame))
	switch {
	case cc.auth == authHandshake && (key == apiVersionsKey || key == saslHandshakeKey):
		return nil
	case cc.auth == authExchange && key == saslAuthenticateKey:
		return nil
	}
	return fmt.Errorf("%w: key %d", errBeforeAuth, key)
}

// step takes one SASL message of the exchange under way: the answer to
// send, and, when the exchange failed, the error that closes the
// connection after that answer (with the client's message in msg).
func (cc *conn) step(in []byte) (out []byte, msg string, err error) {
	out, done, err := cc.exchange.Step(in)
	if err != nil {
		var ae *authz.AuthError
		msg = "Authentication failed"
		user := ""
		if errors.As(err, &ae) {
			msg, user = ae.Msg, ae.User
		}
		cc.s.obs.Authenticated(cc.mechanism, false)
		cc.s.audit.write(slog.LevelWarn, "authentication failed", "remote", cc.remote, "mechanism", cc.mechanism, "user", user, "err", msg)
		cc.exchange = nil
		return nil, msg, fmt.Errorf("%w: %s: %s", errAuthFailed, cc.mechanism, msg)
	}
	if done {
		cc.principal = authz.User(cc.exchange.User())
		cc.auth, cc.exchange = authDone, nil
		cc.s.obs.Authenticated(cc.mechanism, true)
		cc.s.audit.write(slog.LevelInfo, "authenticated", "remote", cc.remote, "mechanism", cc.mechanism, "principal", cc.principal)
	}
	return out, "", nil
}

// rawToken answers one bare SASL token (after SaslHandshake v0) with a
// bare, size-prefixed token; a failure closes the connection at once, as
// Kafka does there: v0 has no way to carry an error.
func (cc *conn) rawToken(ctx context.Context, frame []byte) error {
	out, _, err := cc.step(frame)
	if err != nil {
		return err
	}
	cc.out = binary.BigEndian.AppendUint32(cc.out[:0], uint32(len(out)))
	cc.out = append(cc.out, out...)
	return cc.write(ctx, cc.out)
}

// authorized reports whether the connection's principal may do op on the
// resource, counting and auditing a denial unless quiet (Metadata for
// every topic leaves out what it may not describe without a word, as
// KafkaApis passes logIfDenied = false there).
func (cc *conn) authorized(op authz.Operation, rt authz.ResourceType, name string, quiet bool) bool {
	a := cc.s.cfg.Authorizer
	if a == nil || a.Authorize(cc.principal, cc.host, op, rt, name) {
		return true
	}
	if !quiet {
		cc.s.obs.Denied(op, rt)
		cc.s.audit.write(slog.LevelWarn, "authorization denied", "remote", cc.remote, "principal", cc.principal,
			"operation", op.String(), "resource_type", rt.String(), "resource", name)
	}
	return false
}
