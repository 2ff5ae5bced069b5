package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/listgate/listgate/store/cql"
)

// cqlTLSFiles are the --cql-tls* flags as given.
type cqlTLSFiles struct {
	On             bool
	CA, Cert, Key  string
	ServerName     string
	VerifyHostname bool
}

// cqlTLSFlags are the flags besides --cql-tls that turn TLS to the
// cluster on when set: setting one says TLS is wanted.
var cqlTLSFlags = []string{"cql-tls-ca", "cql-tls-cert", "cql-tls-key", "cql-tls-server-name"}

// loadCQLTLS reads the files the --cql-tls* flags name, at start-up, so
// that a wrong one stops the gateway with its flag and path rather than
// failing every connection later. It returns nil when no such flag is set.
func loadCQLTLS(f cqlTLSFiles, explicit func(string) bool, cluster bool) (*cql.TLS, error) {
	var set []string
	if f.On {
		set = append(set, "--cql-tls")
	}
	for _, name := range cqlTLSFlags {
		if explicit(name) {
			set = append(set, "--"+name)
		}
	}
	if !f.VerifyHostname { // its default, given, says nothing of TLS
		set = append(set, "--cql-tls-verify-hostname=false")
	}
	if len(set) == 0 {
		return nil, nil
	}
	if !cluster {
		return nil, fmt.Errorf("%s: TLS is for connections to a cluster, and no --cql-hosts are set (the embedded store has none)", strings.Join(set, ", "))
	}
	t := &cql.TLS{ServerName: f.ServerName, SkipHostnameCheck: !f.VerifyHostname}
	if f.CA != "" {
		roots, err := readCAs(f.CA)
		if err != nil {
			return nil, fmt.Errorf("--cql-tls-ca %s: %w", f.CA, err)
		}
		t.Roots = roots
	}
	switch {
	case f.Cert != "" && f.Key == "":
		return nil, fmt.Errorf("--cql-tls-cert %s needs --cql-tls-key, the file of its private key", f.Cert)
	case f.Key != "" && f.Cert == "":
		return nil, fmt.Errorf("--cql-tls-key %s needs --cql-tls-cert, the file of its certificate", f.Key)
	case f.Cert != "":
		cert, err := readKeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, err
		}
		t.Certificate = cert
	}
	return t, nil
}

// readCAs reads a PEM bundle of CA certificates. Unlike
// x509.CertPool.AppendCertsFromPEM it refuses a block it cannot parse
// instead of skipping it.
func readCAs(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	n := 0
	for rest := b; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", n+1, err)
		}
		pool.AddCert(cert)
		n++
	}
	if n == 0 {
		return nil, errors.New("no PEM certificate in it (a CA bundle is one or more -----BEGIN CERTIFICATE----- blocks)")
	}
	return pool, nil
}

// readKeyPair reads the client certificate and its key, each error naming
// the flag and the file at fault.
func readKeyPair(certPath, keyPath string) (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, fmt.Errorf("--cql-tls-cert %s: %w", certPath, err)
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("--cql-tls-key %s: %w", keyPath, err)
	}
	if b, _ := pem.Decode(certPEM); b == nil || b.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("--cql-tls-cert %s: no PEM certificate at its start (-----BEGIN CERTIFICATE-----)", certPath)
	}
	if b, _ := pem.Decode(keyPEM); b == nil || !strings.HasSuffix(b.Type, "PRIVATE KEY") {
		return nil, fmt.Errorf("--cql-tls-key %s: no PEM private key at its start (-----BEGIN PRIVATE KEY-----, or an RSA or EC one)", keyPath)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("--cql-tls-cert %s and --cql-tls-key %s: %w", certPath, keyPath, err)
	}
	return &cert, nil
}

// explainTLS adds to a failed connection what the --cql-tls* flags can do
// about it: the driver's words name no flag. The driver keeps only the text
// of the cause, so it is matched by Go's words and the TLS alerts'.
func explainTLS(cfg config, err error) error {
	f, msg := cfg.CQLTLSFiles, err.Error()
	if cfg.CQLTLS == nil {
		// A node that requires TLS hangs up on a plain CQL greeting: the
		// first read ends or is reset, whichever comes first.
		if strings.Contains(msg, "unable to discover protocol version:") && (strings.HasSuffix(strings.TrimSpace(msg), "EOF") || strings.Contains(msg, "connection reset by peer")) {
			return &explainedError{hint: "the node closed the connection at once; if it requires TLS, set --cql-tls (and --cql-tls-ca)", err: err}
		}
		return err
	}
	unknownCA := strings.Contains(msg, "x509: certificate signed by unknown authority")
	var hint string
	switch {
	case unknownCA && f.CA != "":
		hint = "the node's certificate is not signed by a CA of --cql-tls-ca " + f.CA
	case unknownCA:
		hint = "the node's certificate is not signed by a CA this machine trusts: name the cluster's CA with --cql-tls-ca"
	case strings.Contains(msg, "x509: certificate is valid for"):
		hint = "the node's certificate does not name the address dialed (or --cql-tls-server-name): set --cql-tls-server-name to a name it carries, or --cql-tls-verify-hostname=false to check its chain alone"
	case strings.Contains(msg, "tls: certificate required") && f.Cert != "":
		// Go sends no certificate the CAs the node names did not sign.
		hint = "the node requires a client certificate signed by a CA it trusts, and --cql-tls-cert " + f.Cert + " is not"
	case strings.Contains(msg, "tls: certificate required"):
		hint = "the node requires a client certificate: set --cql-tls-cert and --cql-tls-key"
	case strings.Contains(msg, "tls: bad certificate"), strings.Contains(msg, "tls: unknown certificate authority"), strings.Contains(msg, "tls: certificate unknown"), strings.Contains(msg, "tls: certificate expired"):
		hint = "the node refused the client certificate of --cql-tls-cert " + f.Cert + ": it trusts another CA, or the certificate is expired or not for client use"
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		hint = "the node does not speak TLS on this port"
	case hungUp(msg) && f.Cert != "":
		// Under TLS 1.3 a node refuses a client certificate after the
		// client's side of the handshake is done: its alert may be lost to
		// the connection's reset, and the driver sees the connection end.
		hint = "the node hung up during or after the TLS handshake: it requires a client certificate signed by a CA it trusts, and --cql-tls-cert " + f.Cert + " is not (or the node is overloaded)"
	case hungUp(msg):
		hint = "the node hung up during or after the TLS handshake: it requires a client certificate: set --cql-tls-cert and --cql-tls-key (or the node is overloaded)"
	default:
		return err
	}
	return &explainedError{hint: hint, err: err}
}

// hungUp says whether the driver saw a connection end, or stay silent,
// before the node answered its first request.
func hungUp(msg string) bool {
	return strings.Contains(msg, "unable to discover protocol version:") && (strings.HasSuffix(strings.TrimSpace(msg), "EOF") ||
		strings.Contains(msg, "connection reset by peer") || strings.Contains(msg, "no response to connection startup"))
}

// explainedError is a failed connection with what to do about it, first:
// the driver's text ends in a line break.
type explainedError struct {
	hint string
	err  error
}

func (e *explainedError) Error() string { return e.hint + ": " + strings.TrimSpace(e.err.Error()) }
func (e *explainedError) Unwrap() error { return e.err }
