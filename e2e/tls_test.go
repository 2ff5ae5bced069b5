package e2e

import (
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/listgate/listgate/internal/cqltest"
	"github.com/listgate/listgate/internal/gatewaytest"
	"github.com/listgate/listgate/internal/testca"
)

// The gateway reaches a Cassandra node that requires TLS and a client
// certificate: with the right files it serves a write and a read; a CA that
// did not sign the node, no client certificate, one the node does not
// trust, and a node certificate that names neither the address dialed nor
// --cql-tls-server-name each stop it at start-up with an error saying so.
// One node (Cassandra 5.0's PEM files, on 127.0.0.5) serves every case.
func TestClusterTLS(t *testing.T) {
	const addr = "127.0.0.5"
	dir := t.TempDir()
	ca, other := testca.New(t, "listgate test cluster CA"), testca.New(t, "unrelated CA")
	node := ca.Server(t, "cassandra node", []string{"cassandra.test"}, net.ParseIP(addr))
	client, stranger := ca.Client(t, "listgate"), other.Client(t, "stranger")
	caFile, otherCAFile := testca.Write(t, dir, "ca.pem", ca.PEM), testca.Write(t, dir, "other-ca.pem", other.PEM)
	certFile, keyFile := testca.Write(t, dir, "client.pem", client.CertPEM), testca.Write(t, dir, "client-key.pem", client.KeyPEM)
	strangerCert, strangerKey := testca.Write(t, dir, "stranger.pem", stranger.CertPEM), testca.Write(t, dir, "stranger-key.pem", stranger.KeyPEM)

	n := cqltest.StartNode(t, addr,
		"CASSANDRA_CLIENT_TLS_KEYSTORE="+testca.Write(t, dir, "node.pem", node.KeyPEM, node.CertPEM),
		"CASSANDRA_CLIENT_TLS_TRUSTSTORE="+caFile,
		// Nothing here is killed: the faster settings do.
		"CASSANDRA_UNSAFE_SYSTEM=true", "CASSANDRA_COMMITLOG_SYNC=periodic")
	cluster := []string{"LISTGATE_CQL_HOSTS=" + n.Host(), "LISTGATE_CQL_KEYSPACE=tls", "LISTGATE_CQL_TIMEOUT=10s"}
	withClientCert := append(cluster[:len(cluster):len(cluster)], "LISTGATE_CQL_TLS_CERT="+certFile, "LISTGATE_CQL_TLS_KEY="+keyFile)

	t.Run("serves over TLS with a client certificate", func(t *testing.T) {
		g := startGateway(t, append(withClientCert, "LISTGATE_CQL_TLS_CA="+caFile, "LISTGATE_MIGRATE=true", "LISTGATE_LOG_LEVEL=info")...)
		// The start-up line comes on stderr, maybe after the address on stdout.
		want := "tls=\"on (CAs of " + caFile + ", node addresses checked, client certificate " + certFile + ")\""
		for deadline := time.Now().Add(5 * time.Second); !strings.Contains(g.stderr.String(), want); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the start-up line does not say %s:\n%s", want, g.stderr.String())
			}
		}
		gatewaytest.Post(t, g.base, "", `mutation { createListFeature(input: {entityType: "user", name: "seen", valueType: STRING, ttlSeconds: 3600}) { key } }`)
		_, out := gatewaytest.Post(t, g.base, "", `mutation { addListItems(list: {entityType: "user", entityId: "u1", feature: "seen"}, items: [{value: "over TLS"}]) { added } }`)
		if out["errors"] != nil {
			t.Fatalf("add over TLS: %v", out)
		}
		_, out = gatewaytest.Post(t, g.base, "", `{ listItems(entityType: "user", entityId: "u1", feature: "seen") { items { value } } }`)
		if got := fmt.Sprint(out["data"]); got != "map[listItems:map[items:[map[value:over TLS]]]]" {
			t.Fatalf("read over TLS: %s (%v)", got, out["errors"])
		}
	})

	t.Run("checks the chain alone when asked", func(t *testing.T) {
		startGateway(t, append(withClientCert, "LISTGATE_CQL_TLS_CA="+caFile, "LISTGATE_CQL_TLS_SERVER_NAME=elsewhere.test", "LISTGATE_CQL_TLS_VERIFY_HOSTNAME=false")...)
	})

	refused := func(t *testing.T, env []string, want ...string) {
		t.Helper()
		_, stderr, code := runCommand(t, builtBinary(t), append([]string{"LISTGATE_LISTEN=127.0.0.1:0"}, env...))
		if code != 1 {
			t.Fatalf("the gateway exited %d, want 1; it wrote:\n%s", code, stderr)
		}
		for _, w := range want {
			if !strings.Contains(stderr, w) {
				t.Errorf("its error does not say %q:\n%s", w, stderr)
			}
		}
	}
	t.Run("without TLS", func(t *testing.T) {
		refused(t, cluster, "if it requires TLS, set --cql-tls")
	})
	t.Run("a CA that did not sign the node", func(t *testing.T) {
		refused(t, append(withClientCert, "LISTGATE_CQL_TLS_CA="+otherCAFile),
			"x509: certificate signed by unknown authority", "not signed by a CA of --cql-tls-ca "+otherCAFile)
	})
	t.Run("without a client certificate", func(t *testing.T) {
		refused(t, append(cluster, "LISTGATE_CQL_TLS_CA="+caFile), "requires a client certificate: set --cql-tls-cert and --cql-tls-key")
	})
	t.Run("a client certificate the node does not trust", func(t *testing.T) {
		refused(t, append(cluster, "LISTGATE_CQL_TLS_CA="+caFile, "LISTGATE_CQL_TLS_CERT="+strangerCert, "LISTGATE_CQL_TLS_KEY="+strangerKey),
			"requires a client certificate signed by a CA it trusts, and --cql-tls-cert "+strangerCert+" is not")
	})
	t.Run("a server name the node's certificate lacks", func(t *testing.T) {
		refused(t, append(withClientCert, "LISTGATE_CQL_TLS_CA="+caFile, "LISTGATE_CQL_TLS_SERVER_NAME=elsewhere.test"),
			"x509: certificate is valid for cassandra.test, not elsewhere.test", "--cql-tls-server-name")
	})
	t.Run("an address the node's certificate lacks", func(t *testing.T) {
		// The node reached at 127.0.0.6, an address its certificate does
		// not carry: the gateway checks the address it dials.
		relay := relayTo(t, "127.0.0.6:0", n.Host())
		refused(t, []string{"LISTGATE_CQL_HOSTS=" + relay, "LISTGATE_CQL_KEYSPACE=tls", "LISTGATE_CQL_TLS_CA=" + caFile, "LISTGATE_CQL_TLS_CERT=" + certFile, "LISTGATE_CQL_TLS_KEY=" + keyFile},
			"x509: certificate is valid for 127.0.0.5, not 127.0.0.6", "does not name the address dialed")
	})
}

// relayTo listens on addr and copies every connection's bytes to and from
// target, until the test ends. It returns the address it listens on.
func relayTo(t *testing.T, addr, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			go func() { io.Copy(out, in); out.Close() }()
			go func() { io.Copy(in, out); in.Close() }()
		}
	}()
	return ln.Addr().String()
}
