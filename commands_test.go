package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

	"github.com/listgate/listgate/internal/cqltest"
	"github.com/listgate/listgate/store/cql"
)

// runArgs calls run as main would, and returns what it wrote to stdout.
func runArgs(t *testing.T, getenv func(string) string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), args, getenv, &out, io.Discard)
	return out.String(), err
}

// splitCQL splits a CQL file into its statements, as cqlsh would: comment
// lines dropped, statements ended by semicolons.
func splitCQL(text string) []string {
	var lines []string
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			lines = append(lines, line)
		}
	}
	var stmts []string
	for _, s := range strings.Split(strings.Join(lines, "\n"), ";") {
		if s = strings.TrimSpace(s); s != "" {
			stmts = append(stmts, s)
		}
	}
	return stmts
}

// Commands are named first; a wrong name, flag or argument says so, and
// --help of each command says what it does.
func TestCommands(t *testing.T) {
	out, err := runArgs(t, noEnv, "--help")
	if err != nil || !strings.Contains(out, "listgate schema [flags]") || !strings.Contains(out, "listgate backup --to DIR [flags]") {
		t.Fatalf("--help: %v\n%.400s", err, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"scheme"}, `unknown command "scheme": the commands are schema, migrate, backup, load and export`},
		{[]string{"load"}, "no input: name files, or - for standard input"},
		{[]string{"load", "--url", "http://127.0.0.1:1", "--cql-hosts", "127.0.0.1:1", "x.ndjson"}, "--url loads through a gateway: give it alone"},
		{[]string{"load", "--url", "127.0.0.1:8080", "x.ndjson"}, `--url "127.0.0.1:8080": must be the gateway's http(s) URL`},
		{[]string{"load", "--column", "colour=c", "x.ndjson"}, `"colour" is not a row's field`},
		{[]string{"load", "--format", "xml", "x.ndjson"}, `format "xml": must be ndjson, csv or parquet`},
		{[]string{"load", "x.ndjson", "--format", "xml"}, `format "xml": must be ndjson, csv or parquet`},
		{[]string{"load", "--data-dir", "/no/such/folder", "commands_test.go", "--format", "csv"}, "--data-dir /no/such/folder: stat /no/such/folder: no such file or directory: name the folder"},
		{[]string{"migrate"}, "--cql-hosts is required"},
		{[]string{"migrate", "--cql-hosts", "127.0.0.1:1", "--listen", ":1"}, "flag provided but not defined: -listen (listgate migrate --help lists the flags)"},
		{[]string{"migrate", "--cql-hosts", "127.0.0.1:1", "--cql-keyspace", "Bad-Name"}, `keyspace "Bad-Name"`},
		{[]string{"schema", "--cql-hosts", "10.0.0.1"}, "flag provided but not defined: -cql-hosts (listgate schema --help lists the flags)"},
		{[]string{"schema", "extra"}, "unexpected arguments: [extra]"},
		{[]string{"schema", "--cql-keyspace", "Bad-Name"}, `keyspace "Bad-Name"`},
		{[]string{"schema", "--cql-replication", "3"}, `replication "3"`},
		{[]string{"backup"}, "listgate backup needs --to"},
		{[]string{"backup", "--to", "x", "--listen", ":1"}, "flag provided but not defined: -listen (listgate backup --help lists the flags)"},
	} {
		if _, err := runArgs(t, noEnv, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("listgate %s: err = %v, want one saying %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	for cmd, want := range map[string]string{"schema": "--cql-replication string  (LISTGATE_CQL_REPLICATION", "backup": "--data-dir string  (LISTGATE_DATA_DIR",
		"migrate": "--cql-password string  (LISTGATE_CQL_PASSWORD", "load": "--api-key string  (LISTGATE_API_KEY"} {
		out, err := runArgs(t, noEnv, cmd, "--help")
		if err != nil || !strings.HasPrefix(out, "Usage: listgate "+cmd) || !strings.Contains(out, want) {
			t.Errorf("listgate %s --help: %v\n%s", cmd, err, out)
		}
	}
}

// listgate schema takes the gateway's flags and variables, and prints the
// statements Migrate runs, each under its note, ending in a semicolon.
func TestSchemaCommand(t *testing.T) {
	env := map[string]string{"LISTGATE_CQL_KEYSPACE": "from_env"}
	repl := "{'class': 'NetworkTopologyStrategy', 'dc1': 3}"
	out, err := runArgs(t, func(k string) string { return env[k] }, "schema", "--cql-replication", repl)
	if err != nil {
		t.Fatal(err)
	}
	stmts, err := cql.Statements("from_env", cql.Schema{Replication: repl, DefaultTTL: cql.DefaultSchema().DefaultTTL}, cql.DefaultFeedConfig)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, st := range stmts {
		want = append(want, st.CQL)
		if !strings.Contains(out, "\n-- "+strings.SplitN(st.Note, "\n", 2)[0]+"\n") {
			t.Errorf("the note of %.40s… is not printed", st.CQL)
		}
	}
	if got := splitCQL(out); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("listgate schema printed the statements\n%s\nwant\n%s", strings.Join(got, ";\n"), strings.Join(want, ";\n"))
	}
}

// listgate migrate, given the gateway's flags and variables for the
// cluster, leaves a keyspace a gateway serves from without --migrate, and
// exits; run again, it changes nothing and succeeds. A cluster it cannot
// reach makes it fail, saying so.
func TestMigrateCommand(t *testing.T) {
	hosts := cqltest.Hosts(t)
	ks := fmt.Sprintf("ops_migrate_%d", os.Getpid())
	freshKeyspace(t, hosts, ks)
	env := map[string]string{"LISTGATE_CQL_KEYSPACE": ks, "LISTGATE_CQL_TIMEOUT": "10s"}
	getenv := func(k string) string { return env[k] }

	// Before it, a gateway's readiness names the step production runs.
	cfg := cql.DefaultConfig()
	cfg.Hosts, cfg.Keyspace, cfg.Timeout = hosts, ks, 10*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := cql.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Ready(ctx)
	s.Close()
	if err == nil || !strings.Contains(err.Error(), "run listgate migrate") {
		t.Fatalf("readiness before listgate migrate: %v, want it to say run listgate migrate", err)
	}

	// In prod mode the replication must be given: the default keeps one
	// replica. Nothing is created.
	if _, err := runArgs(t, getenv, "migrate", "--mode", "prod", "--cql-hosts", strings.Join(hosts, ",")); err == nil || !strings.Contains(err.Error(), "--mode prod needs --cql-replication") {
		t.Fatalf("listgate migrate --mode prod without --cql-replication: %v", err)
	}
	if s, err = cql.Open(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	exists, err := s.KeyspaceExists(ctx)
	s.Close()
	if err != nil || exists {
		t.Fatalf("after a refused migrate the keyspace exists: %v, %v", exists, err)
	}
	for i := range 2 {
		out, err := runArgs(t, getenv, "migrate", "--cql-hosts", strings.Join(hosts, ","))
		if err != nil || !strings.Contains(out, "keyspace "+ks+" on ") {
			t.Fatalf("listgate migrate: %v\n%s", err, out)
		}
		// In dev mode it says what it chose, when it creates the keyspace.
		if said := strings.Contains(out, "created keyspace "+ks+" with the default replication, {'class': 'SimpleStrategy', 'replication_factor': 1}: one replica"); said != (i == 0) {
			t.Errorf("run %d of listgate migrate in dev mode wrote:\n%s", i+1, out)
		}
	}
	if _, err := runArgs(t, getenv, "migrate", "--mode", "prod", "--cql-replication", "{'class': 'SimpleStrategy', 'replication_factor': 1}", "--cql-hosts", strings.Join(hosts, ",")); err != nil {
		t.Fatalf("listgate migrate --mode prod with --cql-replication: %v", err)
	}
	base := start(t, "--cql-hosts", strings.Join(hosts, ","), "--cql-keyspace", ks, "--cql-timeout", "10s")
	walkthrough(t, base, "user")

	if _, err := runArgs(t, getenv, "migrate", "--cql-hosts", "127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "connecting to CQL hosts 127.0.0.1:1") {
		t.Fatalf("listgate migrate of a cluster that is not there: err = %v", err)
	}
}

// freshKeyspace drops a keyspace now and when the test ends, after the
// gateways' and the stores' cleanups, and returns a session to the
// cluster for the test's own statements.
func freshKeyspace(t *testing.T, hosts []string, ks string) *gocql.Session {
	t.Helper()
	cluster := gocql.NewCluster(hosts...)
	cluster.Timeout = time.Minute // DDL waits for schema agreement on a busy machine
	cluster.Consistency = gocql.One
	session, err := cluster.CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	drop := func() error { return session.Query("DROP KEYSPACE IF EXISTS " + ks).Exec() }
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Logf("dropping %s: %v", ks, err)
		}
		session.Close()
	})
	if err := drop(); err != nil {
		t.Fatal(err)
	}
	return session
}

// The printed schema, applied statement by statement to a fresh keyspace,
// is one a gateway serves from without --migrate; and it is what Migrate
// runs, statement for statement.
func TestPrintedSchemaServes(t *testing.T) {
	hosts := cqltest.Hosts(t)
	ks := fmt.Sprintf("ops_schema_%d", os.Getpid())
	out, err := runArgs(t, noEnv, "schema", "--cql-keyspace", ks)
	if err != nil {
		t.Fatal(err)
	}
	printed := splitCQL(out)
	if len(printed) != 5 {
		t.Fatalf("listgate schema printed %d statements, want the keyspace and four tables:\n%s", len(printed), out)
	}

	session := freshKeyspace(t, hosts, ks)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, stmt := range printed {
		if err := session.Query(stmt).WithContext(ctx).Exec(); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if err := session.AwaitSchemaAgreement(ctx); err != nil {
		t.Fatal(err)
	}

	base := start(t, "--cql-hosts", strings.Join(hosts, ","), "--cql-keyspace", ks, "--cql-timeout", "10s")
	walkthrough(t, base, "user")

	spans := tracetest.NewSpanRecorder()
	cfg := cql.DefaultConfig()
	cfg.Hosts, cfg.Keyspace, cfg.Timeout = hosts, ks, 10*time.Second
	cfg.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	s := cqltest.Open(t, cfg)
	if err := s.Migrate(ctx, cql.DefaultSchema()); err != nil {
		t.Fatal(err)
	}
	var ran []string
	for _, span := range spans.Ended() {
		for _, a := range span.Attributes() {
			if a.Key == semconv.DBQueryTextKey && strings.HasPrefix(a.Value.AsString(), "CREATE ") {
				ran = append(ran, a.Value.AsString())
			}
		}
	}
	t.Logf("applied %d statements to %s; the gateway served from it without --migrate; Migrate ran the same %d", len(printed), ks, len(ran))
	if fmt.Sprint(ran) != fmt.Sprint(printed) {
		t.Fatalf("Migrate ran\n%s\nlistgate schema printed\n%s", strings.Join(ran, ";\n"), strings.Join(printed, ";\n"))
	}
}

// A gateway in prod mode refuses --migrate without --cql-replication, as
// listgate migrate does: the default keeps one replica of each list.
func TestProdMigrateNeedsReplication(t *testing.T) {
	key := "ops " + strings.Repeat("ab", 32) + " lists:read"
	_, err := parseConfig([]string{"--mode", "prod", "--api-keys", key, "--cql-hosts", "127.0.0.1:1", "--migrate"}, noEnv, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--migrate: --mode prod needs --cql-replication") {
		t.Fatalf("--mode prod --migrate without --cql-replication: %v", err)
	}
	if _, err := parseConfig([]string{"--mode", "prod", "--api-keys", key, "--cql-hosts", "127.0.0.1:1", "--migrate", "--cql-replication", "{'class': 'NetworkTopologyStrategy', 'dc1': 3}"}, noEnv, io.Discard); err != nil {
		t.Fatalf("with --cql-replication: %v", err)
	}
}
