package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/listgate/listgate/dataio"
	"github.com/listgate/listgate/endpoint"
	"github.com/listgate/listgate/features"
	"github.com/listgate/listgate/load"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/telemetry"
)

const loadUsage = `Usage: listgate load [--url URL [--api-key KEY] | --cql-hosts HOSTS … | --data-dir DIR] [flags] FILE…

listgate load adds the items of FILEs (- for standard input) to their
lists: rows of NDJSON, CSV or Parquet (by the file's extension, or
--format), one item each, with the columns entityType, entityId, feature,
version, value, timestamp and ttlSeconds (--column maps other names). It
writes through a gateway (--url, every guard of the gateway applying) or
straight into a store (--cql-hosts, or the embedded store of --data-dir,
which no gateway may be serving), with the checks, item keys, TTLs and caps
of the gateway's adds. Bad rows are reported with their file and line and
written nowhere; past --max-errors of them the load stops. A checkpoint
file keeps how far the load went: run the same command again to go on
from there. docs/load-export.md says more.

`

// loadStoreFlags are the gateway's flags that a load straight into a store
// takes: the store's address, login and TLS, the bounds of an add, and the
// feature catalog's.
var loadStoreFlags = []string{"data-dir", "cql-hosts", "cql-keyspace", "cql-local-dc", "cql-username", "cql-password",
	"cql-tls", "cql-tls-ca", "cql-tls-cert", "cql-tls-key", "cql-tls-server-name", "cql-tls-verify-hostname",
	"cql-timeout", "cql-write-consistency", "cql-connections", "max-add-items", "max-value-bytes",
	"feature-staleness", "feature-refresh", "max-clock-offset", "change-feed-shards", "change-feed-retention"}

// runLoad loads files into lists.
func runLoad(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return runLoadTo(ctx, args, getenv, stdout, os.Stdin, stderr)
}

func runLoadTo(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer, stdin io.Reader, stderr io.Writer) error {
	var c config
	fs, text := commandFlags("load", &c, loadStoreFlags...)
	gatewayURL := fs.String("url", "", "the gateway to load through: its base URL (http://host:8080) or its GraphQL endpoint")
	apiKey := fs.String("api-key", "", "the API key (or JWT) to load through the gateway with, sent as Authorization: Bearer; it needs the lists:write scope (and lists:read, for the features)")
	format := fs.String("format", "", "the files' format, ndjson, csv or parquet (default: each file's by its extension: .ndjson, .jsonl, .json, .csv, .parquet)")
	cols := dataio.DefaultColumns()
	fs.Func("column", "FIELD=NAME: the column NAME holds the row's FIELD (entityType, entityId, feature, version, value, timestamp or ttlSeconds); repeat it for each", cols.Map)
	concurrency := fs.Int("concurrency", 8, "batches written at once")
	checkpoint := fs.String("checkpoint", "", "the file that keeps how far the load went, to go on from there when run again (default: the first FILE's name and .checkpoint; none for standard input); removed once every row is written")
	noCheckpoint := fs.Bool("no-checkpoint", false, "keep no checkpoint")
	stampNow := fs.Bool("stamp-now", false, "give rows without a timestamp the time they are loaded (a row written by a stopped run and written again is then a second item); without it they are bad rows")
	maxErrors := fs.Int("max-errors", 100, "bad rows the load goes on past; one more stops it")
	maxRowBytes := fs.Int("max-row-bytes", dataio.DefaultMaxRowBytes, "longest row of NDJSON or CSV, in bytes")
	retries := fs.Int("retries", 10, "times a write that failed for a reason that may pass (the store or the gateway unavailable, throttled, timed out) is tried again")
	batchItems := fs.Int("batch-items", 1000, "items of one addListItemsBatch request (at most the gateway's --max-add-items)")
	batchLists := fs.Int("batch-lists", endpoint.DefaultLimits.MaxBatchLists, "lists of one addListItemsBatch request (at most the gateway's --max-batch-lists)")
	batchBytes := fs.Int("batch-bytes", 900<<10, "bytes of one addListItemsBatch request (below the gateway's --max-body-bytes)")
	progress := fs.String("progress", "auto", "how progress is reported on standard error: bar (redrawn in place), json (a line every --progress-interval), none, or auto (bar on a terminal, json otherwise)")
	every := fs.Duration("progress-interval", 5*time.Second, "time between JSON progress lines")
	explicit, files, err := parseCommandArgs(fs, loadUsage, args, getenv, stdout)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return load.ErrNoInput // before the target is opened
	}
	var f dataio.Format
	if *format != "" {
		if f, err = dataio.ParseFormat(*format); err != nil {
			return fmt.Errorf("--format: %w", err)
		}
	}
	if *concurrency < 1 || *maxErrors < 0 || *maxRowBytes < 1024 || *retries < 0 {
		return errors.New("--concurrency must be 1 or more, --max-errors and --retries 0 or more, --max-row-bytes 1024 or more")
	}
	report, err := loadReport(*progress, *every, stderr)
	if err != nil {
		return err
	}
	ckPath := *checkpoint
	switch {
	case *noCheckpoint:
		ckPath = ""
	case ckPath == "" && len(files) > 0 && files[0] != "-":
		ckPath = files[0] + ".checkpoint"
	}
	c.CQLHosts = splitList(*text.hosts)
	target, err := loadTarget(ctx, c, explicit, *gatewayURL, *apiKey, text, load.Limits{
		ListItems: *batchItems, ListBytes: store.DefaultLimits.MaxAddBytes, BatchLists: *batchLists,
		BatchItems: *batchItems, BatchBytes: *batchBytes, ValueBytes: c.StoreLimits.MaxValueBytes}, *retries)
	if err != nil {
		return err
	}
	defer target.Close()
	sum, err := load.Run(ctx, load.Config{Inputs: files, Stdin: stdin, Format: f, Columns: cols, MaxRowBytes: *maxRowBytes,
		Target: target, Concurrency: *concurrency, Checkpoint: ckPath, StampNow: *stampNow, MaxErrors: *maxErrors, Report: report})
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(stdout, "listgate load: %d rows written, %d bad rows, %d rows skipped as written by an earlier run, in %v\n",
		sum.Rows, sum.Bad, sum.Skipped, sum.Took.Round(time.Millisecond)); err != nil {
		return err
	}
	if sum.Bad > 0 {
		return fmt.Errorf("the load is done, but %d bad rows were written nowhere (reported above with their lines)", sum.Bad)
	}
	return nil
}

// loadTarget opens what a load writes to: the gateway of gatewayURL, the
// cluster of --cql-hosts, or the embedded store of --data-dir.
func loadTarget(ctx context.Context, c config, explicit func(string) bool, gatewayURL, apiKey string, text flagText, lim load.Limits, retries int) (load.Target, error) {
	if gatewayURL != "" {
		if len(c.CQLHosts) > 0 || explicit("data-dir") {
			return nil, errors.New("--url loads through a gateway: give it alone, without --cql-hosts or --data-dir")
		}
		u, err := url.Parse(gatewayURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("--url %q: must be the gateway's http(s) URL, such as http://127.0.0.1:8080", gatewayURL)
		}
		if u.Path == "" || u.Path == "/" {
			u.Path = "/graphql"
		}
		if lim.ListItems < 1 || lim.BatchLists < 1 || lim.BatchBytes < 1024 {
			return nil, errors.New("--batch-items and --batch-lists must be 1 or more, --batch-bytes 1024 or more")
		}
		return &load.GatewayTarget{URL: u.String(), APIKey: apiKey, Client: &http.Client{Timeout: time.Minute}, Limit: lim, Retries: retries}, nil
	}
	if apiKey != "" {
		return nil, errors.New("--api-key is for a load through a gateway (--url)")
	}
	if c.StoreLimits.MaxAddItems < 1 || c.StoreLimits.MaxAddItems > store.DefaultLimits.MaxAddItems {
		return nil, fmt.Errorf("--max-add-items %d: must be from 1 to %d", c.StoreLimits.MaxAddItems, store.DefaultLimits.MaxAddItems)
	}
	if c.StoreLimits.MaxValueBytes < 1 || c.StoreLimits.MaxValueBytes > 65000 {
		return nil, fmt.Errorf("--max-value-bytes %d: must be from 1 to 65000", c.StoreLimits.MaxValueBytes)
	}
	c.StoreLimits.MaxAddBytes = store.DefaultLimits.MaxAddBytes
	c.SlowQuery = 0 // a load's statements are many and large: slow ones are its nature, not news
	var err error
	if c.CQLWriteConsistency, err = parseConsistency(*text.writeCL); err != nil {
		return nil, fmt.Errorf("--cql-write-consistency: %w", err)
	}
	c.CQLReadConsistency = c.CQLWriteConsistency
	if c.CQLTLS, err = loadCQLTLS(c.CQLTLSFiles, explicit, len(c.CQLHosts) > 0); err != nil {
		return nil, err
	}
	if len(c.CQLHosts) == 0 {
		// A folder with no store has no features for the rows.
		if _, err := os.Stat(c.DataDir); err != nil {
			return nil, fmt.Errorf("--data-dir %s: %w: name the folder of the embedded store to load into, --cql-hosts for a cluster, or --url for a gateway", c.DataDir, err)
		}
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	tel := &telemetry.Telemetry{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider()}
	st, err := openStore(ctx, c, tel, log)
	if err != nil {
		if len(c.CQLHosts) == 0 {
			return nil, fmt.Errorf("%w (or load through the gateway serving it, with --url)", err)
		}
		return nil, err
	}
	cat, err := features.New(ctx, st, log, nil)
	if err != nil {
		st.Close()
		return nil, err
	}
	cat.SetStaleness(c.FeatureStaleness)
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	go cat.Run(runCtx, c.FeatureRefresh)
	return &storeTarget{StoreTarget: load.StoreTarget{Store: st, Catalog: cat, Retries: 10}, stop: stop}, nil
}

// storeTarget stops the catalog's refreshes before it closes the store.
type storeTarget struct {
	load.StoreTarget
	stop func()
}

func (t *storeTarget) Close() error {
	t.stop()
	return t.StoreTarget.Close()
}

// loadReport is how a load reports its progress on w.
func loadReport(mode string, every time.Duration, w io.Writer) (load.Report, error) {
	r := load.Report{W: w, Every: every}
	switch mode {
	case "auto":
		f, ok := w.(*os.File)
		if ok {
			fi, err := f.Stat()
			r.Terminal = err == nil && fi.Mode()&os.ModeCharDevice != 0
		}
	case "bar":
		r.Terminal = true
	case "json":
	case "none":
		r.W = nil
	default:
		return r, fmt.Errorf("--progress %q: must be auto, bar, json or none", mode)
	}
	if every <= 0 {
		return r, errors.New("--progress-interval must be above 0")
	}
	return r, nil
}
