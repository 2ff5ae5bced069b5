// Command goclient is a Go recommendation service's use of listgate, cut
// down to one run: it records a user's reads in the user#reading_history
// feature, reads the newest back, keeps the candidate stories the user has
// not read, counts the last day's reads and reads several users' histories
// in one request, and prints what it learned.
//
// Its client is typed: genqlient generates client_gen.go (`go generate`)
// from the gateway's schema.graphqls and this folder's operations.graphql,
// so a field the schema lacks, or a variable of the wrong type, fails the
// build instead of a request. The gateway's contract is all it knows: it
// must never import the gateway's packages.
//
//	LISTGATE_TOKEN=… go run ./examples/goclient -url http://127.0.0.1:8080/graphql -user u1 -reads story1,story2
package main

//go:generate go run github.com/Khan/genqlient genqlient.yaml

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/Khan/genqlient/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "goclient:", err)
		os.Exit(1)
	}
}

// config is what one run does, read from flags and the environment.
type config struct {
	url        string
	token      string // a bearer token; "" sends none (a gateway in dev mode with no keys)
	user       string
	reads      []string // story ids the user read, oldest first
	candidates []string
	users      []string // whose histories are read in one request
	limit      int
	timeout    time.Duration
}

func parseConfig(args []string, getenv func(string) string) (config, error) {
	var c config
	fs := flag.NewFlagSet("goclient", flag.ContinueOnError)
	url := getenv("LISTGATE_URL")
	if url == "" {
		url = "http://127.0.0.1:8080/graphql"
	}
	fs.StringVar(&c.url, "url", url, "the gateway's GraphQL endpoint (LISTGATE_URL)")
	fs.StringVar(&c.user, "user", "u1", "the user whose reads are recorded")
	reads := fs.String("reads", "story1,story2,story3", "stories the user read, oldest first, comma separated")
	candidates := fs.String("candidates", "story2,story4,story5", "stories to recommend if the user has not read them")
	users := fs.String("users", "u1,u2", "users whose histories are read in one request")
	fs.IntVar(&c.limit, "limit", 10, "reads per history page")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Second, "how long the whole run may take")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	// Not a flag: a token on the command line shows in ps and shell history.
	c.token = getenv("LISTGATE_TOKEN")
	c.reads, c.candidates, c.users = splitList(*reads), splitList(*candidates), splitList(*users)
	if c.user == "" {
		return c, errors.New("-user is empty")
	}
	return c, nil
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cfg, err := parseConfig(args, getenv)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	httpClient := &http.Client{Transport: http.DefaultTransport}
	if cfg.token != "" {
		httpClient.Transport = bearer{token: cfg.token, next: http.DefaultTransport}
	}
	return recommend(ctx, graphql.NewClient(cfg.url, httpClient), cfg, time.Now, stdout)
}

// bearer adds the caller's token to every request. A token the gateway
// refuses comes back as HTTP 401 with UNAUTHENTICATED, which genqlient
// returns as a *graphql.HTTPError.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context()) // a RoundTripper must not change its caller's request
	req.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(req)
}

// recommend is the service's work, one typed call per step.
func recommend(ctx context.Context, gql graphql.Client, cfg config, clock func() time.Time, out io.Writer) error {
	if err := ensureFeature(ctx, gql, out); err != nil {
		return err
	}

	now := clock()
	if len(cfg.reads) > 0 {
		reads := make([]ListItemInput, len(cfg.reads))
		for i, story := range cfg.reads {
			// The reads came a second apart, the last one now. A timestamp
			// of the service's own makes a retried add the same items.
			at := now.Add(time.Duration(i+1-len(cfg.reads)) * time.Second)
			reads[i] = ListItemInput{Value: story, Timestamp: &at}
		}
		rec, err := RecordReads(ctx, gql, cfg.user, reads)
		if err != nil {
			return fmt.Errorf("recording %s's reads: %w", cfg.user, err)
		}
		fmt.Fprintf(out, "recorded %d reads of %s (%d already expired)\n", rec.AddListItems.Added, cfg.user, rec.AddListItems.Expired)
	}

	recent, err := RecentReads(ctx, gql, cfg.user, cfg.limit)
	if err != nil {
		return fmt.Errorf("reading %s's newest reads: %w", cfg.user, err)
	}
	fmt.Fprintf(out, "newest reads of %s (more: %v):\n", cfg.user, recent.ListItems.HasMore)
	for _, r := range recent.ListItems.Items {
		fmt.Fprintf(out, "  %s %s\n", r.Value, r.Timestamp.Format(time.RFC3339Nano))
	}

	if len(cfg.candidates) > 0 {
		seen, err := ReadCandidates(ctx, gql, cfg.user, cfg.candidates)
		if err != nil {
			return fmt.Errorf("looking for %s's reads of the candidates: %w", cfg.user, err)
		}
		var unread []string
		for i, read := range seen.Entity.ListContains { // one entry per candidate, in order
			if read == nil {
				unread = append(unread, cfg.candidates[i])
			}
		}
		fmt.Fprintf(out, "not yet read by %s: %s (of %s)\n", cfg.user, words(unread), words(cfg.candidates))
	}

	day, err := ReadsSince(ctx, gql, cfg.user, now.Add(-24*time.Hour))
	if err != nil {
		return fmt.Errorf("counting %s's reads: %w", cfg.user, err)
	}
	fmt.Fprintf(out, "reads of %s in the last 24h: %d\n", cfg.user, day.ListCount)

	if len(cfg.users) > 0 {
		h, err := ReadingHistories(ctx, gql, cfg.users, cfg.limit)
		// GraphQL errors (a gqlerror.List) with entities: some lists could
		// not be read and are nil; the others stand.
		var failed gqlerror.List
		if err != nil && !(errors.As(err, &failed) && len(h.Entities) == len(cfg.users)) {
			return fmt.Errorf("reading the histories of %s: %w", words(cfg.users), err)
		}
		fmt.Fprintf(out, "histories of %s:\n", words(cfg.users))
		for _, e := range h.Entities {
			if e.List == nil {
				fmt.Fprintf(out, "  %s: not read: %s\n", e.EntityId, strings.TrimSpace(failed.Error()))
				continue
			}
			var stories []string
			for _, r := range e.List.Items {
				stories = append(stories, r.Value)
			}
			fmt.Fprintf(out, "  %s: %s\n", e.EntityId, words(stories))
		}
	}
	return nil
}

// ensureFeature creates user#reading_history unless it exists. Its values
// must be strings: the generated client binds ListValue to string.
func ensureFeature(ctx context.Context, gql graphql.Client, out io.Writer) error {
	for created := ""; ; created = " (created by another client)" {
		r, err := ReadingHistoryFeature(ctx, gql)
		if err != nil {
			return fmt.Errorf("reading the reading_history feature: %w", err)
		}
		if f := r.ListFeature; f != nil {
			if f.ValueType != ValueTypeString {
				return fmt.Errorf("feature %s holds %s values, not STRING", f.Key, f.ValueType)
			}
			fmt.Fprintf(out, "feature %s: exists%s, %s, ttl %ds\n", f.Key, created, f.ValueType, f.TtlSeconds)
			return nil
		}
		c, err := CreateReadingHistoryFeature(ctx, gql)
		var gerr *gqlerror.Error
		if created == "" && errors.As(err, &gerr) && gerr.Extensions["code"] == "CONFLICT" {
			continue // another instance created it since the read: read it again
		}
		if err != nil {
			return fmt.Errorf("creating the reading_history feature: %w", err)
		}
		f := c.CreateListFeature
		fmt.Fprintf(out, "feature %s: created, %s, ttl %ds\n", f.Key, f.ValueType, f.TtlSeconds)
		return nil
	}
}

func words(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, " ")
}
