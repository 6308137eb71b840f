package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kfollower/kfollower/authz"
	"github.com/kfollower/kfollower/wire/server"
)

// serveSecurity is the --serve settings of the endpoint's security and
// limits (issue 18). It is embedded in config; every field is a flag.
type serveSecurity struct {
	ServeTLSCert             string
	ServeTLSKey              string
	ServeTLSClientCA         string
	ServePrincipalRules      string
	ServeSASLCredentials     string
	ServeSASLMechanisms      listFlag
	ServeACLFile             string
	ServeACLReloadInterval   time.Duration
	ServeACLUpstream         bool
	ServeACLRefresh          time.Duration
	ServeAllowAnonymous      bool
	ServeMaxConnections      int
	ServeMaxConnectionsPerIP int
	ServeMaxRequestBytes     int64
	ServeIdleTimeout         time.Duration

	// sec is what the files hold, loaded by checkServe.
	sec *loadedSecurity
}

// loadedSecurity is the key material, credentials and rules the files
// hold, checked before anything is written.
type loadedSecurity struct {
	tls       *tls.Config
	mapper    *authz.Mapper
	sasl      authz.Authenticator
	acl       *authz.File
	upstream  *upstreamACLs
	listen    string // the address bound: --serve, :PORT made loopback
	anonymous bool   // no client authenticates
}

func (c *config) serveSecurityFlags(fs *flag.FlagSet) {
	c.ServeSASLMechanisms = listFlag{authz.ScramSHA512, authz.ScramSHA256, authz.Plain}
	c.ServeACLReloadInterval = 10 * time.Second
	c.ServeACLRefresh = time.Minute
	c.ServeMaxRequestBytes = server.DefaultMaxRequestBytes
	c.ServeIdleTimeout = server.DefaultIdleTimeout
	fs.StringVar(&c.ServeTLSCert, "serve-tls-cert", c.ServeTLSCert, "PEM `file` of the served endpoint's certificate chain: Kafka clients connect with TLS")
	fs.StringVar(&c.ServeTLSKey, "serve-tls-key", c.ServeTLSKey, "PEM `file` of --serve-tls-cert's key")
	fs.StringVar(&c.ServeTLSClientCA, "serve-tls-client-ca", c.ServeTLSClientCA, "PEM `file` of the CAs whose client certificates are accepted: mutual TLS, every client must present one, and without SASL its subject names the principal")
	fs.StringVar(&c.ServePrincipalRules, "serve-principal-mapping-rules", c.ServePrincipalRules, "`rules` mapping a client certificate's subject to User:<name>, as Kafka's ssl.principal.mapping.rules (RULE:pattern/replacement/[LU],...,DEFAULT; default DEFAULT, the whole subject)")
	fs.StringVar(&c.ServeSASLCredentials, "serve-sasl-credentials", c.ServeSASLCredentials, "`file` of SASL users (lines 'USER password=PASSWORD' or 'USER SCRAM-SHA-512=[salt=...,stored_key=...,server_key=...,iterations=...]'): every client must authenticate")
	fs.Var(&c.ServeSASLMechanisms, "serve-sasl-mechanisms", "SASL `mechanisms` offered with --serve-sasl-credentials, of SCRAM-SHA-512, SCRAM-SHA-256, PLAIN")
	fs.StringVar(&c.ServeACLFile, "serve-acl-file", c.ServeACLFile, "`file` of ACL entries ('ALLOW|DENY User:NAME READ|DESCRIBE|ALL TOPIC|GROUP|CLUSTER LITERAL|PREFIXED NAME [HOST]'), Kafka's semantics, deny by default; reloaded on change and on SIGHUP, an invalid file leaving the old rules in force")
	fs.DurationVar(&c.ServeACLReloadInterval, "serve-acl-reload-interval", c.ServeACLReloadInterval, "how often --serve-acl-file is checked for a change")
	fs.BoolVar(&c.ServeACLUpstream, "serve-acl-upstream", c.ServeACLUpstream, "authorize with the cluster's own ACLs instead of --serve-acl-file: read with DescribeAcls (kfollower's principal needs DESCRIBE on the CLUSTER) every --serve-acl-refresh; until the first read every request is denied, a failed read keeps the last rules")
	fs.DurationVar(&c.ServeACLRefresh, "serve-acl-refresh", c.ServeACLRefresh, "how often --serve-acl-upstream reads the cluster's ACLs: a change upstream takes effect here within this `interval`")
	fs.BoolVar(&c.ServeAllowAnonymous, "serve-allow-anonymous", c.ServeAllowAnonymous, "serve clients that do not authenticate on an address other than loopback (warned at start and in /status)")
	fs.IntVar(&c.ServeMaxConnections, "serve-max-connections", c.ServeMaxConnections, "`count` of client connections open at once; one more is closed as accepted (0: no limit; Kafka's max.connections)")
	fs.IntVar(&c.ServeMaxConnectionsPerIP, "serve-max-connections-per-ip", c.ServeMaxConnectionsPerIP, "`count` of client connections open at once from one IP (0: no limit; Kafka's max.connections.per.ip)")
	fs.Var(sizeFlag{&c.ServeMaxRequestBytes}, "serve-max-request-bytes", "largest request `size` taken; a larger one closes its connection (Kafka's socket.request.max.bytes)")
	fs.DurationVar(&c.ServeIdleTimeout, "serve-idle-timeout", c.ServeIdleTimeout, "close a client connection idle, or slow to send one request, for this `duration` (Kafka's connections.max.idle.ms)")
}

// serveListen is the address --serve binds: an address without a host
// (":9092") binds loopback only.
func serveListen(addr string) string {
	if host, port, err := net.SplitHostPort(addr); err == nil && host == "" {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}

// isLoopback reports whether host is only reachable from this machine.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkServeSecurity checks the security flags and loads their files.
func (c *config) checkServeSecurity() error {
	anyFlag := c.ServeTLSCert != "" || c.ServeTLSKey != "" || c.ServeTLSClientCA != "" || c.ServePrincipalRules != "" ||
		c.ServeSASLCredentials != "" || c.ServeACLFile != "" || c.ServeACLUpstream || c.ServeAllowAnonymous || c.ServeMaxConnections != 0 || c.ServeMaxConnectionsPerIP != 0
	if c.Serve == "" {
		if anyFlag {
			return errors.New("the --serve-tls-*, --serve-sasl-*, --serve-acl-*, --serve-allow-anonymous and --serve-max-* settings need --serve")
		}
		return nil
	}
	switch {
	case (c.ServeTLSCert == "") != (c.ServeTLSKey == ""):
		return errors.New("--serve-tls-cert and --serve-tls-key go together")
	case c.ServeTLSClientCA != "" && c.ServeTLSCert == "":
		return errors.New("--serve-tls-client-ca needs --serve-tls-cert and --serve-tls-key")
	case c.ServePrincipalRules != "" && c.ServeTLSClientCA == "":
		return errors.New("--serve-principal-mapping-rules needs --serve-tls-client-ca")
	case c.ServeMaxConnections < 0 || c.ServeMaxConnectionsPerIP < 0:
		return errors.New("--serve-max-connections and --serve-max-connections-per-ip must not be negative")
	case c.ServeMaxRequestBytes < 1024 || c.ServeMaxRequestBytes > 1<<31-1:
		return errors.New("--serve-max-request-bytes must be between 1024 and 2147483647")
	case c.ServeIdleTimeout <= 0 || c.ServeACLReloadInterval <= 0 || c.ServeACLRefresh <= 0:
		return errors.New("--serve-idle-timeout, --serve-acl-reload-interval and --serve-acl-refresh must be positive")
	case c.ServeACLUpstream && c.ServeACLFile != "":
		return errors.New("give one source of ACLs: --serve-acl-file or --serve-acl-upstream")
	}
	sec := &loadedSecurity{listen: serveListen(c.Serve)}
	if c.ServeTLSCert != "" {
		cert, err := tls.LoadX509KeyPair(c.ServeTLSCert, c.ServeTLSKey)
		if err != nil {
			return fmt.Errorf("--serve-tls-cert %s / --serve-tls-key %s: %w", c.ServeTLSCert, c.ServeTLSKey, err)
		}
		sec.tls = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		if c.ServeTLSClientCA != "" {
			pem, err := os.ReadFile(c.ServeTLSClientCA)
			if err != nil {
				return fmt.Errorf("--serve-tls-client-ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return fmt.Errorf("--serve-tls-client-ca %s: no PEM certificate", c.ServeTLSClientCA)
			}
			sec.tls.ClientCAs, sec.tls.ClientAuth = pool, tls.RequireAndVerifyClientCert
			if sec.mapper, err = authz.ParseMappingRules(c.ServePrincipalRules); err != nil {
				return fmt.Errorf("--serve-principal-mapping-rules: %w", err)
			}
		}
	}
	if c.ServeSASLCredentials != "" {
		b, err := os.ReadFile(c.ServeSASLCredentials)
		if err != nil {
			return fmt.Errorf("--serve-sasl-credentials: %w", err)
		}
		creds, err := authz.ParseCredentials(c.ServeSASLCredentials, b)
		if err != nil {
			return fmt.Errorf("--serve-sasl-credentials: %w", err)
		}
		var mechs []string
		for _, m := range c.ServeSASLMechanisms {
			m = strings.ToUpper(m)
			if !slices.Contains(creds.Mechanisms(), m) {
				return fmt.Errorf("--serve-sasl-mechanisms: %q is not one of %s", m, strings.Join(creds.Mechanisms(), ", "))
			}
			mechs = append(mechs, m)
		}
		if len(mechs) == 0 {
			return errors.New("--serve-sasl-mechanisms is empty")
		}
		sec.sasl = offered{creds, mechs}
	}
	if c.ServeACLFile != "" {
		f, err := authz.LoadFile(c.ServeACLFile)
		if err != nil {
			return fmt.Errorf("--serve-acl-file: %w", err)
		}
		sec.acl = f
	}
	if c.ServeACLUpstream {
		sec.upstream = &upstreamACLs{interval: c.ServeACLRefresh}
	}
	sec.anonymous = sec.sasl == nil && sec.mapper == nil
	host, _, _ := net.SplitHostPort(sec.listen)
	if sec.anonymous && !isLoopback(host) && !c.ServeAllowAnonymous {
		return fmt.Errorf("--serve %s is reachable from other machines and no client authenticates: give --serve-sasl-credentials or --serve-tls-client-ca, bind loopback (--serve :PORT), or accept anonymous clients with --serve-allow-anonymous", c.Serve)
	}
	c.sec = sec
	return nil
}

// offered is an Authenticator limited to some of its mechanisms.
type offered struct {
	a     authz.Authenticator
	mechs []string
}

func (o offered) Mechanisms() []string { return o.mechs }
func (o offered) Start(m string) (authz.Exchange, bool) {
	if !slices.Contains(o.mechs, m) {
		return nil, false
	}
	return o.a.Start(m)
}

// securityConfig adds the loaded security and limits to a server config.
func (c *config) securityConfig(sc *server.Config) {
	s := c.sec
	sc.TLS, sc.SASL = s.tls, s.sasl
	if s.mapper != nil {
		sc.CertPrincipal = s.mapper.Principal
	}
	if s.acl != nil {
		sc.Authorizer = s.acl.Store()
	}
	if s.upstream != nil {
		sc.Authorizer = &s.upstream.store
	}
	sc.MaxConnections, sc.MaxConnectionsPerIP = c.ServeMaxConnections, c.ServeMaxConnectionsPerIP
	sc.MaxRequestBytes, sc.IdleTimeout = int32(c.ServeMaxRequestBytes), c.ServeIdleTimeout
}

// securityStatus is the endpoint's security as /status shows it.
type securityStatus struct {
	TLS            bool     `json:"tls"`
	MutualTLS      bool     `json:"mutual_tls"`
	SASLMechanisms []string `json:"sasl_mechanisms,omitempty"`
	Anonymous      bool     `json:"anonymous"`
	ACLFile        string   `json:"acl_file,omitempty"`
	// ACLError is why the ACL file's current content is not in force
	// (the previous rules are).
	ACLError string `json:"acl_error,omitempty"`
	// ACLUpstream: the cluster's ACLs, read every ACLRefresh, last at
	// ACLRead (absent before the first read: everything is denied).
	ACLUpstream bool       `json:"acl_upstream,omitempty"`
	ACLRefresh  string     `json:"acl_refresh,omitempty"`
	ACLRead     *time.Time `json:"acl_read,omitempty"`
	Warnings    []string   `json:"warnings,omitempty"`
}

// securityWarnings are what the start log and /status warn about.
func (c *config) securityWarnings() []string {
	s := c.sec
	var w []string
	host, _, _ := net.SplitHostPort(s.listen)
	if s.anonymous && !isLoopback(host) {
		w = append(w, fmt.Sprintf("serving %s to clients that do not authenticate (--serve-allow-anonymous): anyone who reaches it reads what it serves", s.listen))
	}
	if !s.anonymous && s.acl == nil && s.upstream == nil {
		w = append(w, "no --serve-acl-file: every authenticated principal may read every served topic")
	}
	if s.sasl != nil && s.tls == nil && slices.Contains(s.sasl.Mechanisms(), authz.Plain) {
		w = append(w, "SASL PLAIN without TLS: passwords cross the network in the clear")
	}
	return w
}

func (c *config) securityStatus() securityStatus {
	s := c.sec
	st := securityStatus{TLS: s.tls != nil, MutualTLS: s.mapper != nil, Anonymous: s.anonymous, Warnings: c.securityWarnings()}
	if s.sasl != nil {
		st.SASLMechanisms = s.sasl.Mechanisms()
	}
	if s.acl != nil {
		st.ACLFile = s.acl.Path()
		if err := s.acl.Err(); err != nil {
			st.ACLError = err.Error()
		}
	}
	if u := s.upstream; u != nil {
		st.ACLUpstream, st.ACLRefresh = true, u.interval.String()
		loaded, err := u.status()
		if !loaded.IsZero() {
			st.ACLRead = &loaded
		}
		if err != nil {
			st.ACLError = err.Error()
		}
	}
	return st
}

// watchACL reloads the ACL file every interval and on SIGHUP until ctx
// ends, logging each new set of rules and each rejected file once.
func watchACL(ctx context.Context, f *authz.File, interval time.Duration, logger *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	t := time.NewTicker(interval)
	defer t.Stop()
	var lastErr string
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			logger.Info("SIGHUP: reloading the ACL file", "file", f.Path())
		case <-t.C:
		}
		changed, err := f.Reload()
		switch {
		case err != nil && err.Error() != lastErr:
			lastErr = err.Error()
			logger.Error("ACL file rejected; the previous rules stay in force", "file", f.Path(), "err", err)
		case changed:
			lastErr = ""
			logger.Info("ACL file reloaded", "file", f.Path(), "entries", len(f.Store().Rules().Entries()))
		}
	}
}

// aclWatcher runs watchACL on its own goroutine and waits for it.
type aclWatcher struct{ wg sync.WaitGroup }

func (w *aclWatcher) start(ctx context.Context, f *authz.File, interval time.Duration, logger *slog.Logger) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		watchACL(ctx, f, interval, logger)
	}()
}
