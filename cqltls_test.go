package main

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/listgate/listgate/internal/testca"
	"github.com/listgate/listgate/store/cql"
)

// The --cql-tls* flags: a right set gives the store its TLS setting, from
// flags or variables; each wrong one stops start-up naming its flag and file.
func TestCQLTLSConfig(t *testing.T) {
	dir := t.TempDir()
	ca, other := testca.New(t, "cluster CA"), testca.New(t, "other CA")
	client, stranger := ca.Client(t, "listgate"), other.Client(t, "someone")
	caFile := testca.Write(t, dir, "ca.pem", ca.PEM)
	certFile, keyFile := testca.Write(t, dir, "client.pem", client.CertPEM), testca.Write(t, dir, "client-key.pem", client.KeyPEM)
	strangerKey := testca.Write(t, dir, "stranger-key.pem", stranger.KeyPEM)
	notPEM := testca.Write(t, dir, "not.pem", []byte("not a certificate\n"))
	badBlock := testca.Write(t, dir, "bad.pem", []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	missing := filepath.Join(dir, "missing.pem")
	noEnv := func(string) string { return "" }
	hosts := []string{"--cql-hosts", "10.0.0.1"}

	c, err := parseConfig(append(hosts, "--cql-tls-ca", caFile, "--cql-tls-cert", certFile, "--cql-tls-key", keyFile), noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.CQLTLS == nil || c.CQLTLS.Roots == nil || c.CQLTLS.Certificate == nil || c.CQLTLS.SkipHostnameCheck || c.CQLTLS.ServerName != "" {
		t.Fatalf("TLS setting %+v", c.CQLTLS)
	}
	if got := tlsMode(c); got != "on (CAs of "+caFile+", node addresses checked, client certificate "+certFile+")" {
		t.Errorf("start-up line's tls: %q", got)
	}

	env := map[string]string{"LISTGATE_CQL_HOSTS": "10.0.0.1", "LISTGATE_CQL_TLS": "true", "LISTGATE_CQL_TLS_SERVER_NAME": "cassandra.example.com", "LISTGATE_CQL_TLS_VERIFY_HOSTNAME": "false"}
	if c, err = parseConfig(nil, func(k string) string { return env[k] }, io.Discard); err != nil {
		t.Fatal(err)
	}
	if c.CQLTLS == nil || c.CQLTLS.Roots != nil || c.CQLTLS.Certificate != nil || !c.CQLTLS.SkipHostnameCheck || c.CQLTLS.ServerName != "cassandra.example.com" {
		t.Fatalf("TLS setting from the environment %+v", c.CQLTLS)
	}

	if c, err = parseConfig(hosts, noEnv, io.Discard); err != nil || c.CQLTLS != nil || tlsMode(c) != "off" {
		t.Fatalf("without TLS flags: %+v, %v", c.CQLTLS, err)
	}
	// A shared environment that sets the check to its default leaves TLS
	// off, on a cluster or on the embedded store.
	for _, args := range [][]string{hosts, nil} {
		if c, err = parseConfig(append(args, "--cql-tls-verify-hostname=true"), noEnv, io.Discard); err != nil || c.CQLTLS != nil {
			t.Fatalf("--cql-tls-verify-hostname=true with %v: %+v, %v", args, c.CQLTLS, err)
		}
	}

	for _, bad := range []struct {
		args []string
		want []string // in the error
	}{
		{[]string{"--cql-tls"}, []string{"--cql-tls:", "--cql-hosts", "embedded"}},
		{[]string{"--cql-tls-ca", caFile}, []string{"--cql-tls-ca", "--cql-hosts"}},
		{append(hosts, "--cql-tls-ca", missing), []string{"--cql-tls-ca " + missing, "no such file"}},
		{append(hosts, "--cql-tls-ca", notPEM), []string{"--cql-tls-ca " + notPEM, "no PEM certificate"}},
		{append(hosts, "--cql-tls-ca", badBlock), []string{"--cql-tls-ca " + badBlock, "certificate 1"}},
		{append(hosts, "--cql-tls-cert", certFile), []string{"--cql-tls-cert " + certFile, "needs --cql-tls-key"}},
		{append(hosts, "--cql-tls-key", keyFile), []string{"--cql-tls-key " + keyFile, "needs --cql-tls-cert"}},
		{append(hosts, "--cql-tls-cert", missing, "--cql-tls-key", keyFile), []string{"--cql-tls-cert " + missing, "no such file"}},
		{append(hosts, "--cql-tls-cert", certFile, "--cql-tls-key", missing), []string{"--cql-tls-key " + missing, "no such file"}},
		{append(hosts, "--cql-tls-cert", notPEM, "--cql-tls-key", keyFile), []string{"--cql-tls-cert " + notPEM, "no PEM certificate"}},
		{append(hosts, "--cql-tls-cert", certFile, "--cql-tls-key", certFile), []string{"--cql-tls-key " + certFile, "no PEM private key"}},
		{append(hosts, "--cql-tls-cert", certFile, "--cql-tls-key", strangerKey), []string{"--cql-tls-cert " + certFile, "--cql-tls-key " + strangerKey, "does not match"}},
	} {
		_, err := parseConfig(bad.args, noEnv, io.Discard)
		if err == nil {
			t.Errorf("parseConfig(%v) accepted", bad.args)
			continue
		}
		for _, w := range bad.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("parseConfig(%v): %v; want it to say %q", bad.args, err, w)
			}
		}
	}
}

// A node port that does not speak TLS is named as such.
func TestCQLTLSAgainstAPlainPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HTTP/1.0 400 Bad Request\r\n\r\n"))
			c.Close()
		}
	}()
	cfg, err := parseConfig([]string{"--cql-hosts", ln.Addr().String(), "--cql-tls"}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c := cql.DefaultConfig()
	c.Hosts, c.TLS = cfg.CQLHosts, cfg.CQLTLS
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := cql.Open(ctx, c)
	if err == nil {
		s.Close()
		t.Fatal("Open succeeded against a port that speaks no CQL")
	}
	if err = explainTLS(cfg, err); !strings.HasPrefix(err.Error(), "the node does not speak TLS on this port: ") || strings.HasSuffix(err.Error(), "\n") {
		t.Fatalf("error %q", err)
	}
}
