package authz

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/xdg-go/scram"
)

// The SASL mechanisms served.
const (
	Plain        = "PLAIN"
	ScramSHA256  = "SCRAM-SHA-256"
	ScramSHA512  = "SCRAM-SHA-512"
	scramIters   = 4096 // Kafka's default and minimum for SCRAM-SHA-256/512
	scramSaltLen = 32
)

// Authenticator is the server side of SASL.
type Authenticator interface {
	// Mechanisms are the mechanisms offered, in preference order.
	Mechanisms() []string
	// Start begins an exchange; ok is false for a mechanism not offered.
	Start(mechanism string) (x Exchange, ok bool)
}

// Exchange is one SASL authentication in progress.
type Exchange interface {
	// Step takes the client's next message and returns the answer to
	// send; done once the client is authenticated. An *AuthError means
	// authentication failed: its message is for the client.
	Step(msg []byte) (answer []byte, done bool, err error)
	// User is the authenticated user name, once done.
	User() string
}

// AuthError is a failed authentication. Msg is what Kafka tells the
// client in SASL_AUTHENTICATION_FAILED: it names no secret and does not
// tell an unknown user from a wrong password.
type AuthError struct {
	Msg string
	// User is the user name the client gave, if any, for the audit log.
	User string
}

func (e *AuthError) Error() string { return e.Msg }

// failed is the message of ScramSaslServer's failures, as
// SaslServerAuthenticator.handleSaslToken words it.
func failed(mechanism, user string) *AuthError {
	return &AuthError{Msg: "Authentication failed during authentication due to invalid credentials with SASL mechanism " + mechanism, User: user}
}

// Credentials are the users that may authenticate, read from a file by
// ParseCredentials. It is an Authenticator offering PLAIN and the SCRAM
// mechanisms; it holds no password. Safe for concurrent use.
type Credentials struct {
	users map[string]*userCreds
}

type userCreds struct {
	sha256, sha512 *scram.StoredCredentials
}

// Users is the number of users.
func (c *Credentials) Users() int { return len(c.users) }

// String names no secret.
func (c *Credentials) String() string { return fmt.Sprintf("Credentials(%d users)", len(c.users)) }

// ParseCredentials reads a credentials file, one credential a line:
//
//	USER password=PASSWORD
//	USER SCRAM-SHA-256=[salt=B64,stored_key=B64,server_key=B64,iterations=N]
//	USER SCRAM-SHA-512=[...]
//
// The password is the rest of the line after "password=", spaces
// included; it is salted and hashed for both SCRAM mechanisms as it loads
// and then dropped. The SCRAM form is the salted credential itself (the
// values Kafka's ScramFormatter stores). Blank lines and lines starting
// with # are skipped. Errors name the file and line, never the secret.
func ParseCredentials(file string, data []byte) (*Credentials, error) {
	c := &Credentials{users: map[string]*userCreds{}}
	var errs []error
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimLeft(strings.TrimRight(sc.Text(), "\r"), " \t")
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		user, cred, ok := strings.Cut(text, " ")
		if !ok {
			user, cred, ok = strings.Cut(text, "\t")
		}
		cred = strings.TrimLeft(cred, " \t")
		if !ok || user == "" || cred == "" {
			errs = append(errs, fmt.Errorf("%s:%d: want USER password=PASSWORD or USER SCRAM-SHA-256=[...]", file, line))
			continue
		}
		if err := c.add(user, cred); err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: user %q: %w", file, line, user, err))
		}
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", file, err))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(c.users) == 0 {
		return nil, fmt.Errorf("%s: no credentials", file)
	}
	return c, nil
}

func (c *Credentials) add(user, cred string) error {
	u := c.users[user]
	if u == nil {
		u = &userCreds{}
		c.users[user] = u
	}
	if pw, ok := strings.CutPrefix(cred, "password="); ok {
		if pw == "" {
			return errors.New("empty password")
		}
		if u.sha256 != nil || u.sha512 != nil {
			return errors.New("credentials given twice")
		}
		var err error
		if u.sha256, err = derive(scram.SHA256, user, pw); err != nil {
			return err
		}
		u.sha512, err = derive(scram.SHA512, user, pw)
		return err
	}
	mech, rest, ok := strings.Cut(cred, "=")
	if !ok || (mech != ScramSHA256 && mech != ScramSHA512) {
		return errors.New("want password=PASSWORD, SCRAM-SHA-256=[...] or SCRAM-SHA-512=[...]")
	}
	sc, err := parseSalted(rest)
	if err != nil {
		return fmt.Errorf("%s: %w", mech, err)
	}
	slot := &u.sha256
	if mech == ScramSHA512 {
		slot = &u.sha512
	}
	if *slot != nil {
		return fmt.Errorf("%s given twice", mech)
	}
	*slot = sc
	return nil
}

// derive salts and hashes a password into SCRAM's stored credentials.
func derive(h scram.HashGeneratorFcn, user, password string) (*scram.StoredCredentials, error) {
	cl, err := h.NewClient(user, password, "")
	if err != nil {
		return nil, errors.New("the password is not valid under SASLprep (RFC 4013)")
	}
	salt := make([]byte, scramSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return nil, err
	}
	sc, err := cl.GetStoredCredentialsWithError(scram.KeyFactors{Salt: string(salt), Iters: scramIters})
	if err != nil {
		return nil, err
	}
	return &sc, nil
}

// parseSalted parses [salt=B64,stored_key=B64,server_key=B64,iterations=N].
func parseSalted(s string) (*scram.StoredCredentials, error) {
	body, ok := strings.CutPrefix(s, "[")
	if body, ok2 := strings.CutSuffix(body, "]"); ok && ok2 {
		s = body
	} else {
		return nil, errors.New("want [salt=...,stored_key=...,server_key=...,iterations=...]")
	}
	var sc scram.StoredCredentials
	seen := map[string]bool{}
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		if seen[k] {
			return nil, fmt.Errorf("%s given twice", k)
		}
		seen[k] = true
		var err error
		switch k {
		case "salt":
			var b []byte
			b, err = base64.StdEncoding.DecodeString(v)
			sc.Salt = string(b)
		case "stored_key":
			sc.StoredKey, err = base64.StdEncoding.DecodeString(v)
		case "server_key":
			sc.ServerKey, err = base64.StdEncoding.DecodeString(v)
		case "iterations":
			sc.Iters, err = strconv.Atoi(v)
			if err == nil && sc.Iters < scramIters {
				err = fmt.Errorf("at least %d", scramIters)
			}
		default:
			return nil, fmt.Errorf("unknown field %q (want salt, stored_key, server_key, iterations)", k)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %v", k, err)
		}
	}
	for _, k := range []string{"salt", "stored_key", "server_key", "iterations"} {
		if !seen[k] {
			return nil, fmt.Errorf("no %s", k)
		}
	}
	if sc.Salt == "" || len(sc.StoredKey) == 0 || len(sc.ServerKey) == 0 {
		return nil, errors.New("empty salt or key")
	}
	return &sc, nil
}

// Mechanisms offers SCRAM first, as the stronger.
func (c *Credentials) Mechanisms() []string { return []string{ScramSHA512, ScramSHA256, Plain} }

func (c *Credentials) Start(mechanism string) (Exchange, bool) {
	switch mechanism {
	case Plain:
		return &plainExchange{c: c}, true
	case ScramSHA256, ScramSHA512:
		h, pick := scram.SHA256, func(u *userCreds) *scram.StoredCredentials { return u.sha256 }
		if mechanism == ScramSHA512 {
			h, pick = scram.SHA512, func(u *userCreds) *scram.StoredCredentials { return u.sha512 }
		}
		srv, err := h.NewServer(func(user string) (scram.StoredCredentials, error) {
			if u := c.users[user]; u != nil && pick(u) != nil {
				return *pick(u), nil
			}
			return scram.StoredCredentials{}, errors.New("unknown user")
		})
		if err != nil {
			return nil, false
		}
		return &scramExchange{mech: mechanism, conv: srv.NewConversation()}, true
	}
	return nil, false
}

// plainExchange is PlainSaslServer: one message, authzid NUL authcid NUL
// password (RFC 4616).
type plainExchange struct {
	c    *Credentials
	user string
}

func (x *plainExchange) User() string { return x.user }

func (x *plainExchange) Step(msg []byte) ([]byte, bool, error) {
	parts := strings.Split(string(msg), "\x00")
	if len(parts) != 3 {
		return nil, false, &AuthError{Msg: "Invalid SASL/PLAIN response: expected 3 tokens, got " + strconv.Itoa(len(parts))}
	}
	authz, user, pw := parts[0], parts[1], parts[2]
	if user == "" || pw == "" {
		return nil, false, &AuthError{Msg: "Authentication failed: username and password must not be empty", User: user}
	}
	if authz != "" && authz != user {
		return nil, false, &AuthError{Msg: "Authentication failed: Client requested an authorization id that is different from username", User: user}
	}
	if !x.c.checkPassword(user, pw) {
		return nil, false, &AuthError{Msg: "Authentication failed: Invalid username or password", User: user}
	}
	x.user = user
	return nil, true, nil
}

// checkPassword hashes pw with the user's stored salt and compares the
// keys in constant time.
func (c *Credentials) checkPassword(user, pw string) bool {
	u := c.users[user]
	if u == nil {
		return false
	}
	for _, m := range []struct {
		h  scram.HashGeneratorFcn
		sc *scram.StoredCredentials
	}{{scram.SHA512, u.sha512}, {scram.SHA256, u.sha256}} {
		if m.sc == nil {
			continue
		}
		cl, err := m.h.NewClient(user, pw, "")
		if err != nil {
			return false
		}
		got, err := cl.GetStoredCredentialsWithError(m.sc.KeyFactors)
		return err == nil && hmac.Equal(got.StoredKey, m.sc.StoredKey)
	}
	return false
}

// scramExchange is ScramSaslServer (RFC 5802): client-first, then
// client-final, whose answer carries the server signature.
type scramExchange struct {
	mech string
	conv *scram.ServerConversation
	user string
}

func (x *scramExchange) User() string { return x.user }

func (x *scramExchange) Step(msg []byte) ([]byte, bool, error) {
	out, err := x.conv.Step(string(msg))
	if err != nil {
		return nil, false, failed(x.mech, x.conv.Username())
	}
	if x.conv.Done() {
		// An authorization id other than the user is refused, as
		// ScramSaslServer refuses it.
		if !x.conv.Valid() || x.conv.AuthzID() != "" && x.conv.AuthzID() != x.conv.Username() {
			return nil, false, failed(x.mech, x.conv.Username())
		}
		x.user = x.conv.Username()
		return []byte(out), true, nil
	}
	return []byte(out), false, nil
}
