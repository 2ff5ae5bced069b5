package cql

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/gocql/gocql"
)

// TLS says how the store encrypts its connections and which nodes it
// trusts. It holds key material already read: the caller reads files and
// reports their faults.
type TLS struct {
	// Roots are the CAs a node's certificate must chain to; nil: the
	// system's.
	Roots *x509.CertPool
	// Certificate is presented to nodes that require a client certificate;
	// nil: none.
	Certificate *tls.Certificate
	// ServerName is the name a node's certificate must carry, and the SNI
	// sent; "": the address dialed. The driver dials every node by the IP
	// address the cluster announces, so without it a certificate must
	// carry that IP address among its SANs.
	ServerName string
	// SkipHostnameCheck still verifies the chain against Roots, but not
	// the name: for clusters whose certificates name neither the nodes'
	// addresses nor one common name.
	SkipHostnameCheck bool
}

// sslOptions is the driver's TLS setting. gocql's SslOptions is insecure
// unless told otherwise (EnableHostVerification false with no tls.Config
// skips every check), so the tls.Config is always given in full; gocql then
// sets its ServerName to the address of each connection when it is empty
// and verification is on, and Go checks that address against the IP SANs.
func (t *TLS) sslOptions() *gocql.SslOptions {
	c := &tls.Config{
		MinVersion: tls.VersionTLS12,
		RootCAs:    t.Roots,
		ServerName: t.ServerName,
		// Resumed sessions spare a full handshake per reconnection.
		ClientSessionCache: tls.NewLRUClientSessionCache(256),
	}
	if t.Certificate != nil {
		c.Certificates = []tls.Certificate{*t.Certificate}
	}
	if !t.SkipHostnameCheck {
		return &gocql.SslOptions{Config: c, EnableHostVerification: true}
	}
	// Go verifies the chain and the name together or neither: skip its
	// verification and verify the chain alone. EnableHostVerification must
	// stay false, or gocql turns InsecureSkipVerify off again.
	c.InsecureSkipVerify = true
	c.VerifyConnection = func(cs tls.ConnectionState) error { return verifyChain(cs, t.Roots) }
	return &gocql.SslOptions{Config: c}
}

// verifyChain checks that the node's certificate chains to roots (the
// system's when nil) and is meant for a server, whatever names it carries.
func verifyChain(cs tls.ConnectionState, roots *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the node sent no certificate")
	}
	intermediates := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		intermediates.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: intermediates,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return fmt.Errorf("the node's certificate: %w", err)
	}
	return nil
}
