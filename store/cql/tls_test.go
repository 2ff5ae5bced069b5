package cql_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/listgate/listgate/internal/testca"
	"github.com/listgate/listgate/store/cql"
)

// handshakes is a TLS listener on 127.0.0.1 that completes handshakes and
// reports each one's outcome, then hangs up: enough to see what the store's
// TLS setting accepts, without a CQL server.
func handshakes(t *testing.T, leaf testca.Leaf) (addr string, outcomes <-chan error) {
	t.Helper()
	cert, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	out := make(chan error, 64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			out <- c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	return ln.Addr().String(), out
}

// The store checks a node's certificate against the IP address it dials
// (or the server name given), and the chain against the CAs given even
// when names are not checked.
func TestTLSVerifiesTheNode(t *testing.T) {
	ca, other := testca.New(t, "cluster CA"), testca.New(t, "other CA")
	roots, otherRoots := x509.NewCertPool(), x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.PEM)
	otherRoots.AppendCertsFromPEM(other.PEM)
	right := ca.Server(t, "node", []string{"node.test"}, net.ParseIP("127.0.0.1"))
	wrongIP := ca.Server(t, "node", []string{"node.test"}, net.ParseIP("127.0.0.2"))

	for _, c := range []struct {
		name      string
		leaf      testca.Leaf
		tls       cql.TLS
		handshake bool   // whether the handshake must complete
		client    string // in the store's error when it must not
	}{
		{"the IP dialed is a SAN", right, cql.TLS{Roots: roots}, true, ""},
		{"the IP dialed is not a SAN", wrongIP, cql.TLS{Roots: roots}, false, "valid for 127.0.0.2, not 127.0.0.1"},
		{"the server name is a SAN", wrongIP, cql.TLS{Roots: roots, ServerName: "node.test"}, true, ""},
		{"the server name is not a SAN", right, cql.TLS{Roots: roots, ServerName: "other.test"}, false, "valid for node.test, not other.test"},
		{"names unchecked, chain right", wrongIP, cql.TLS{Roots: roots, SkipHostnameCheck: true}, true, ""},
		{"names unchecked, another CA", right, cql.TLS{Roots: otherRoots, SkipHostnameCheck: true}, false, "unknown authority"},
		{"another CA", right, cql.TLS{Roots: otherRoots}, false, "unknown authority"},
	} {
		t.Run(c.name, func(t *testing.T) {
			addr, outcomes := handshakes(t, c.leaf)
			cfg := cql.DefaultConfig()
			cfg.Hosts = []string{addr}
			cfg.ConnectTimeout = 2 * time.Second
			cfg.TLS = &c.tls
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s, err := cql.Open(ctx, cfg)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded against a server that speaks no CQL")
			}
			t.Logf("Open: %v", err)
			var server error
			select {
			case server = <-outcomes:
			case <-ctx.Done():
				t.Fatalf("the store never connected; Open: %v", err)
			}
			if c.handshake && server != nil {
				t.Fatalf("the handshake failed on the server's side (%v); Open: %v", server, err)
			}
			if !c.handshake {
				if server == nil {
					t.Fatalf("the handshake completed; Open: %v", err)
				}
				if !strings.Contains(err.Error(), c.client) {
					t.Fatalf("Open: %v; want it to say %q", err, c.client)
				}
			}
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				t.Fatal("Open took the whole deadline")
			}
		})
	}
}
