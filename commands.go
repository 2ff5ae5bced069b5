package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/listgate/listgate/store/cql"
)

// command is one of listgate's commands besides serving: it parses its own
// args and does its job.
type command func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error

// commands are listgate's commands, by the name that comes first on its
// command line; with flags alone, listgate serves.
var commands = map[string]command{
	"schema":  runSchema,
	"migrate": runMigrate,
	"backup":  runBackup,
	"load":    runLoad,
	"export":  runExport,
}

// runCommand runs the command args[0] names.
func runCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cmd, ok := commands[args[0]]
	if !ok {
		return fmt.Errorf("unknown command %q: the commands are schema, migrate, backup, load and export, and listgate with flags alone serves (listgate --help says more)", args[0])
	}
	if err := cmd(ctx, args[1:], getenv, stdout, stderr); !errors.Is(err, flag.ErrHelp) {
		return err
	}
	return nil // the usage is written
}

// isCommand reports whether args name a command rather than start with
// the gateway's flags.
func isCommand(args []string) bool {
	return len(args) > 0 && !strings.HasPrefix(args[0], "-")
}

// commandFlags is the flag set of a command, with the gateway's flags it
// shares, as the gateway defines them (the same defaults, usage and
// variables), each setting its part of c. The command adds its own.
func commandFlags(name string, c *config, shared ...string) (*flag.FlagSet, flagText) {
	all, text := newFlagSet(c)
	fs := flag.NewFlagSet("listgate "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	for _, n := range shared {
		f := all.Lookup(n)
		fs.Var(f.Value, f.Name, f.Usage)
	}
	return fs, text
}

// parseCommand reads a command's flags from args, then the variables of
// the flags not given, and returns which flags were set, either way
// (explicitly). On --help it writes the usage, head first, to help and
// returns flag.ErrHelp.
func parseCommand(fs *flag.FlagSet, head string, args []string, getenv func(string) string, help io.Writer) (func(name string) bool, error) {
	explicit, rest, err := parseCommandArgs(fs, head, args, getenv, help)
	if err != nil {
		return nil, err
	}
	if len(rest) > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v (%s --help lists the flags)", rest, fs.Name())
	}
	return explicit, nil
}

// parseCommandArgs is parseCommand for a command that takes arguments
// among its flags, which it returns.
func parseCommandArgs(fs *flag.FlagSet, head string, args []string, getenv func(string) string, help io.Writer) (func(name string) bool, []string, error) {
	// Flags may come after arguments too: FILE --flag is read as the
	// flag and the argument.
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				writeUsage(help, head, fs)
				return nil, nil, err
			}
			return nil, nil, fmt.Errorf("%w (%s --help lists the flags)", err, fs.Name())
		}
		if fs.NArg() == 0 {
			break
		}
		rest, args = append(rest, fs.Arg(0)), fs.Args()[1:]
	}
	set, err := setFromEnv(fs, getenv)
	if err != nil {
		return nil, nil, err
	}
	return explicitly(set, getenv), rest, nil
}

// explicitly says whether a flag was set, on the command line (set) or by
// its variable.
func explicitly(set map[string]bool, getenv func(string) string) func(name string) bool {
	return func(name string) bool { return set[name] || getenv(envName(name)) != "" }
}

const schemaUsage = `Usage: listgate schema [flags]

listgate schema prints the CQL that listgate migrate runs: the keyspace,
with the replication of --cql-replication, and every table with its
options, each under a note of what a DBA may tune and what must stay as it
is. Apply it with cqlsh -f (or run listgate migrate), then start the
gateways.

`

// runSchema prints the schema Migrate applies.
func runSchema(_ context.Context, args []string, getenv func(string) string, stdout, _ io.Writer) error {
	var c config
	fs, _ := commandFlags("schema", &c, "cql-keyspace", "cql-replication")
	if _, err := parseCommand(fs, schemaUsage, args, getenv, stdout); err != nil {
		return err
	}
	return cql.WriteSchema(stdout, c.CQLKeyspace, c.schema(), c.Feed)
}

// schema is what --migrate creates, and listgate schema prints.
func (c config) schema() cql.Schema {
	sc := cql.DefaultSchema()
	sc.Replication = c.CQLReplication
	return sc
}

const migrateUsage = `Usage: listgate migrate --cql-hosts HOSTS [flags]

listgate migrate creates on the cluster the keyspace and tables that are
missing (what listgate schema prints), adds the columns a schema of an
earlier release lacks, waits for every node to agree on the schema, checks
it as a gateway's readiness does, and exits: 0 when the gateways can
serve, 1 with the reason otherwise. It never drops anything, so running it
again, or on every release, is safe. Run it before the gateways start (a
Kubernetes Job: deploy/kubernetes/migrate); --migrate on the gateway does
the same before serving, for development. It takes the gateway's flags and
variables for the cluster.

The keyspace is created with --cql-replication. With --mode prod it must
be given: the default keeps one replica of each list, which suits a
development node alone; without --mode prod, a keyspace created with the
default says so.

`

// migrateFlags are the gateway's flags that listgate migrate takes: the
// cluster's address, login and TLS, and what the schema depends on.
var migrateFlags = []string{"cql-hosts", "cql-keyspace", "cql-local-dc", "cql-username", "cql-password",
	"cql-tls", "cql-tls-ca", "cql-tls-cert", "cql-tls-key", "cql-tls-server-name", "cql-tls-verify-hostname",
	"cql-timeout", "cql-replication", "change-feed-retention", "mode"}

// runMigrate applies the schema to the cluster and exits.
func runMigrate(ctx context.Context, args []string, getenv func(string) string, stdout, _ io.Writer) error {
	var c config
	fs, text := commandFlags("migrate", &c, migrateFlags...)
	explicit, err := parseCommand(fs, migrateUsage, args, getenv, stdout)
	if err != nil {
		return err
	}
	c.CQLHosts = splitList(*text.hosts)
	if len(c.CQLHosts) == 0 {
		return errors.New("--cql-hosts is required: listgate migrate creates the schema on a cluster (the embedded store needs none)")
	}
	if err := checkReplication(c.Mode, explicit("cql-replication")); err != nil {
		return err
	}
	tls, err := loadCQLTLS(c.CQLTLSFiles, explicit, true)
	if err != nil {
		return err
	}
	c.CQLTLS = tls
	cfg := cqlConfig(c)
	cfg.Feed.Retention = c.Feed.Retention
	s, err := cql.Open(ctx, cfg)
	if err != nil {
		return explainTLS(c, err)
	}
	defer s.Close()
	existed, err := s.KeyspaceExists(ctx)
	if err != nil {
		return err
	}
	if err := s.Migrate(ctx, c.schema()); err != nil {
		return err
	}
	if err := s.Ready(ctx); err != nil {
		return err
	}
	if !existed && c.CQLReplication == cql.DefaultSchema().Replication {
		if _, err := fmt.Fprintf(stdout, "listgate migrate: created keyspace %s %s\n", c.CQLKeyspace, defaultReplication); err != nil {
			return err
		}
	}
	_, err = fmt.Fprintf(stdout, "listgate migrate: keyspace %s on %s holds the schema, and every node agrees on it\n", c.CQLKeyspace, strings.Join(c.CQLHosts, ","))
	return err
}

// checkReplication refuses to create a keyspace in prod mode with the
// default replication, which keeps one replica of each list.
func checkReplication(mode string, explicit bool) error {
	switch {
	case mode != "dev" && mode != "prod":
		return fmt.Errorf("--mode %q: must be dev or prod", mode)
	case mode == "prod" && !explicit:
		return fmt.Errorf("--mode prod needs --cql-replication, the keyspace's replication map, such as \"{'class': 'NetworkTopologyStrategy', 'dc1': 3}\": the default, %s, keeps one replica of each list, which suits a development node alone", cql.DefaultSchema().Replication)
	}
	return nil
}

// defaultReplication says what a keyspace created without
// --cql-replication got.
var defaultReplication = "with the default replication, " + cql.DefaultSchema().Replication +
	": one replica of each list, for development; set --cql-replication (ALTER KEYSPACE changes it later, then run nodetool repair)"
