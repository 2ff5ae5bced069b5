package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/listgate/listgate/dataio"
	"github.com/listgate/listgate/load"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/cql"
	"github.com/listgate/listgate/store/embedded"
	"github.com/listgate/listgate/store/keys"
	"github.com/listgate/listgate/values"
)

const exportUsage = `Usage: listgate export (--cql-hosts HOSTS [flags] | --data-dir DIR) [--feature TYPE/NAME[@VERSION]] [--out FILE] [--format ndjson|csv|parquet]

listgate export writes every item of a feature's lists (of every feature
when --feature is not given) as rows in the format listgate load reads:
one row per item, its columns entityType, entityId, feature, version,
value, timestamp (RFC 3339 with nanoseconds, UTC) and ttlSeconds (the
feature's TTL: an item lives that long past its timestamp). What it
writes is what a read shows: no expired item, nothing past a capped
list's maxItems, nothing written before a feature was created again.

From a cluster (--cql-hosts) it reads the whole list_items table by
token ranges, several at once; from the embedded store (--data-dir, which
no running gateway may hold: stop it, or export from a backup) it reads
each feature's lists in one scan. Rows go to --out, written whole or not
at all (a failed export leaves no file), or to stdout. Progress goes to
stderr (--progress): on a terminal a line redrawn in place, otherwise a
JSON line every --progress-interval; and a summary at the end.

`

// exportFlags are the gateway's flags that listgate export takes: the
// store's address, login and TLS.
var exportFlags = []string{"cql-hosts", "cql-keyspace", "cql-local-dc", "cql-username", "cql-password",
	"cql-tls", "cql-tls-ca", "cql-tls-cert", "cql-tls-key", "cql-tls-server-name", "cql-tls-verify-hostname",
	"cql-timeout", "data-dir"}

// exportCommand is what listgate export was asked.
type exportCommand struct {
	feature string // TYPE/NAME[@VERSION]; "": every feature
	out     string // the file to write; "" or "-": stdout
	format  string // ndjson, csv or parquet; "": by --out's extension
}

// runExport writes the items of features' lists in the format listgate
// load reads.
func runExport(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var c config
	fs, text := commandFlags("export", &c, exportFlags...)
	var cmd exportCommand
	fs.StringVar(&cmd.feature, "feature", "", "the feature to export, TYPE/NAME or TYPE/NAME@VERSION (user/reading_history@2025/03/11); every feature when not given")
	fs.StringVar(&cmd.out, "out", "", "the file to write (written whole or not at all); stdout when not given or -")
	fs.StringVar(&cmd.format, "format", "", "ndjson, csv or parquet; by default from --out's extension (.ndjson, .jsonl, .csv, .parquet), ndjson on stdout")
	progress := fs.String("progress", "auto", "how progress is reported on standard error: bar (a line redrawn in place), json (a line every --progress-interval), none, or auto (bar on a terminal, json otherwise)")
	every := fs.Duration("progress-interval", 5*time.Second, "time between JSON progress lines")
	explicit, err := parseCommand(fs, exportUsage, args, getenv, stdout)
	if err != nil {
		return err
	}
	rep, err := loadReport(*progress, *every, stderr)
	if err != nil {
		return err
	}
	c.CQLHosts = splitList(*text.hosts)
	if len(c.CQLHosts) > 0 && explicit("data-dir") {
		return errors.New("listgate export reads one store: give --cql-hosts or --data-dir, not both")
	}
	if len(c.CQLHosts) == 0 && !explicit("data-dir") {
		return errors.New("listgate export needs the store to read: --cql-hosts HOSTS for a cluster, or --data-dir DIR for the embedded store")
	}
	format, err := exportFormat(cmd.format, cmd.out)
	if err != nil {
		return err
	}
	want, err := parseFeatureRef(cmd.feature)
	if err != nil {
		return err
	}
	s, err := openExportStore(ctx, c, explicit)
	if err != nil {
		return err
	}
	defer s.Close()
	features, err := exportFeatures(ctx, s, want)
	if err != nil {
		return err
	}
	return writeExport(ctx, s, features, cmd.out, format, stdout, rep)
}

// exportFormat is the format of the rows: as asked, or by the file's
// extension, NDJSON on stdout.
func exportFormat(format, out string) (dataio.Format, error) {
	if format != "" {
		return dataio.ParseFormat(format)
	}
	if out == "" || out == "-" {
		return dataio.NDJSON, nil
	}
	f, ok := dataio.FormatOf(out)
	if !ok {
		return "", fmt.Errorf("--out %s: its extension names no format (.ndjson, .jsonl, .csv, .parquet); give --format", out)
	}
	return f, nil
}

// featureRef names a feature: entity type, name, version.
type featureRef struct{ entityType, name, version string }

// parseFeatureRef reads TYPE/NAME[@VERSION]: the type ends at the first
// '/', the name at the first '@' (neither holds one), and the version,
// which may hold both, is the rest. "" names every feature (a zero ref).
func parseFeatureRef(s string) (featureRef, error) {
	if s == "" {
		return featureRef{}, nil
	}
	typ, rest, ok := strings.Cut(s, "/")
	if !ok {
		return featureRef{}, fmt.Errorf("--feature %q: must be TYPE/NAME or TYPE/NAME@VERSION, e.g. user/reading_history", s)
	}
	name, version, _ := strings.Cut(rest, "@")
	if err := keys.ValidateFeature(typ, name, version); err != nil {
		return featureRef{}, fmt.Errorf("--feature %q: %w", s, err)
	}
	return featureRef{typ, name, version}, nil
}

// exportStore is a store an export reads.
type exportStore interface {
	store.Store
	store.Exporter
}

// openExportStore opens the cluster or the embedded store the flags name.
func openExportStore(ctx context.Context, c config, explicit func(string) bool) (exportStore, error) {
	if len(c.CQLHosts) == 0 {
		s, err := embedded.Open(embedded.Config{Dir: c.DataDir, Existing: true})
		var inUse *embedded.InUseError
		if errors.As(err, &inUse) {
			return nil, fmt.Errorf("%w; stop it first, or export from a backup of it (listgate backup)", err)
		}
		if err != nil {
			return nil, fmt.Errorf("--data-dir %s: %w", c.DataDir, err)
		}
		return s, nil
	}
	tls, err := loadCQLTLS(c.CQLTLSFiles, explicit, true)
	if err != nil {
		return nil, err
	}
	c.CQLTLS = tls
	s, err := cql.Open(ctx, cqlConfig(c))
	if err != nil {
		return nil, explainTLS(c, err)
	}
	return s, nil
}

// exportFeatures are the features an export reads: the one ref names, or
// every feature when it names none.
func exportFeatures(ctx context.Context, s store.Store, ref featureRef) ([]*store.Feature, error) {
	all, err := s.Features(ctx, ref.entityType)
	if err != nil {
		return nil, err
	}
	var out []*store.Feature
	for i := range all {
		f := &all[i]
		if ref == (featureRef{}) || f.Name == ref.name && f.Version == ref.version {
			out = append(out, f)
		}
	}
	if len(out) == 0 && ref != (featureRef{}) {
		return nil, fmt.Errorf("--feature %s/%s@%s: no such feature", ref.entityType, ref.name, ref.version)
	}
	return out, nil
}

// writeExport exports features to out (stdout when "" or "-"), into a
// file beside it first, renamed to it once every row is written.
func writeExport(ctx context.Context, s store.Exporter, features []*store.Feature, out string, format dataio.Format, stdout io.Writer, rep load.Report) (err error) {
	w, to := stdout, "stdout"
	if out != "" && out != "-" {
		f, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".*.tmp")
		if err != nil {
			return fmt.Errorf("--out %s: %w", out, err)
		}
		w, to = f, out
		defer func() {
			if err == nil {
				if err = f.Sync(); err == nil {
					err = f.Close()
				}
				if err == nil {
					err = os.Rename(f.Name(), out)
				}
				if err != nil {
					err = fmt.Errorf("--out %s: %w", out, err)
				}
			}
			if err != nil {
				f.Close()
				os.Remove(f.Name())
			}
		}()
	}
	rows, err := dataio.NewWriter(format, w)
	if err != nil {
		return err
	}
	p := newExportProgress(rep)
	err = s.Export(ctx, features, func(run store.ListItems) error {
		f := run.Feature
		row := dataio.Row{EntityType: f.EntityType, EntityID: run.EntityID, Feature: f.Name, Version: f.Version, HasTimestamp: true,
			TTLSeconds: int64(f.TTL / time.Second), HasTTL: true}
		written, skipped := 0, 0
		for _, it := range run.Items {
			// A value another tool wrote that is no value of the
			// feature's type is left out, as reads leave it out.
			if values.Check(f.ValueType, it.Value) != nil {
				skipped++
				continue
			}
			row.Value = dataio.StoredValue(f.ValueType, it.Value)
			row.Timestamp = it.Timestamp
			if err := rows.Write(row); err != nil {
				return fmt.Errorf("writing rows to %s: %w", to, err)
			}
			written++
		}
		p.add(written, skipped)
		return nil
	})
	if err != nil {
		return err
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("writing rows to %s: %w", to, err)
	}
	p.done(len(features), to)
	return nil
}
