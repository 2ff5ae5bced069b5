package main

import (
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
)

// startupAttrs are the fields of the one line logged at start-up: what an
// operator reading the log must know first about this process.
func startupAttrs(cfg config, b build, listen string, ops *opsListeners) []any {
	metrics, pprof := "off", "off"
	switch {
	case ops.metrics != "":
		metrics = ops.metrics
	case metricsOnAPI(cfg):
		metrics = listen
	}
	if ops.pprof != "" {
		pprof = ops.pprof
	}
	return []any{
		"version", b.Version,
		"mode", cfg.Mode,
		slog.Group("store", storeAttrs(cfg)...),
		"listen", listen,
		"auth", authMethod(cfg),
		"metrics_listen", metrics,
		"pprof_listen", pprof,
	}
}

// storeAttrs say which store serves: the embedded one's folder, or the
// cluster, keyspace, local data centre and consistency levels.
func storeAttrs(cfg config) []any {
	if len(cfg.CQLHosts) == 0 {
		dir, err := filepath.Abs(cfg.DataDir)
		if err != nil {
			dir = cfg.DataDir
		}
		return []any{"kind", "embedded", "data_dir", dir}
	}
	return []any{
		"kind", "cql",
		"hosts", strings.Join(cfg.CQLHosts, ","),
		"keyspace", cfg.CQLKeyspace,
		"local_dc", cfg.CQLLocalDC,
		"read_consistency", cfg.CQLReadConsistency.String(),
		"write_consistency", cfg.CQLWriteConsistency.String(),
		"tls", tlsMode(cfg),
	}
}

// tlsMode says whether connections to the cluster are encrypted and what
// the nodes are trusted by.
func tlsMode(cfg config) string {
	t, f := cfg.CQLTLS, cfg.CQLTLSFiles
	if t == nil {
		return "off"
	}
	parts := []string{"CAs of the system"}
	if f.CA != "" {
		parts[0] = "CAs of " + f.CA
	}
	switch {
	case t.SkipHostnameCheck:
		parts = append(parts, "host names not checked")
	case t.ServerName != "":
		parts = append(parts, "server name "+t.ServerName)
	default:
		parts = append(parts, "node addresses checked")
	}
	if f.Cert != "" {
		parts = append(parts, "client certificate "+f.Cert)
	}
	return "on (" + strings.Join(parts, ", ") + ")"
}

// authMethod says how callers are authenticated. Without keys of any kind
// every caller has every scope, which only --mode dev allows.
func authMethod(cfg config) string {
	var methods []string
	if n := len(cfg.APIKeys); n > 0 {
		methods = append(methods, fmt.Sprintf("API keys (%d)", n))
	}
	var jwtKeys []string
	if cfg.JWTKeysFile != "" {
		jwtKeys = append(jwtKeys, "keys file "+cfg.JWTKeysFile)
	}
	if cfg.JWTJWKSURL != "" {
		u := cfg.JWTJWKSURL
		if parsed, err := url.Parse(u); err == nil {
			u = parsed.Redacted()
		}
		jwtKeys = append(jwtKeys, "JWKS URL "+u)
	}
	if len(jwtKeys) > 0 {
		methods = append(methods, "JWT ("+strings.Join(jwtKeys, "; ")+")")
	}
	if len(methods) == 0 {
		return "none (dev)"
	}
	return strings.Join(methods, ", ")
}
