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
var cqlTLSFlags = []string{"cql-tls-ca", "cql-tls-cert", "cql-tls-key", "cql-tls-server-name", "cql-tls-verify-hostname"}

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
