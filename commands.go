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
type command func(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error

// commands are listgate's commands, by the name that comes first on its
// command line; with flags alone, listgate serves.
var commands = map[string]command{
	"schema": runSchema,
	"backup": runBackup,
}

// runCommand runs the command args[0] names.
func runCommand(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cmd, ok := commands[args[0]]
	if !ok {
		return fmt.Errorf("unknown command %q: the commands are schema and backup, and listgate with flags alone serves (listgate --help says more)", args[0])
	}
	if err := cmd(ctx, args[1:], getenv, stdout); !errors.Is(err, flag.ErrHelp) {
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
func commandFlags(name string, c *config, shared ...string) *flag.FlagSet {
	all, _ := newFlagSet(c)
	fs := flag.NewFlagSet("listgate "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	for _, n := range shared {
		f := all.Lookup(n)
		fs.Var(f.Value, f.Name, f.Usage)
	}
	return fs
}

// parseCommand reads a command's flags from args, then the variables of
// the flags not given. On --help it writes the usage, head first, to help
// and returns flag.ErrHelp.
func parseCommand(fs *flag.FlagSet, head string, args []string, getenv func(string) string, help io.Writer) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			writeUsage(help, head, fs)
			return err
		}
		return fmt.Errorf("%w (%s --help lists the flags)", err, fs.Name())
	}
	if _, err := setFromEnv(fs, getenv); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v (%s --help lists the flags)", fs.Args(), fs.Name())
	}
	return nil
}

const schemaUsage = `Usage: listgate schema [flags]

listgate schema prints the CQL that listgate --migrate runs: the keyspace,
with the replication of --cql-replication, and every table with its
options, each under a note of what a DBA may tune and what must stay as it
is. Apply it with cqlsh -f, then start the gateways without --migrate.

`

// runSchema prints the schema Migrate applies.
func runSchema(_ context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	var c config
	fs := commandFlags("schema", &c, "cql-keyspace", "cql-replication")
	if err := parseCommand(fs, schemaUsage, args, getenv, stdout); err != nil {
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
