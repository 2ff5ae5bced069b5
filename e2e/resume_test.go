package e2e

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/listgate/listgate/internal/cqltest"
	"github.com/listgate/listgate/internal/wsclient"
)

// resumeKeyspace is the keyspace of these tests' gateways on Cassandra:
// their own, so that the feed they follow holds their adds alone.
const resumeKeyspace = "resume"

// Two gateways on Cassandra. A client subscribed through A receives X
// (stamped 30 minutes ahead, the first of an add of two) and the items of
// two more adds, and goes away; an item stamped now and one an hour old
// are added through B meanwhile. Subscribed again through B after X's
// position, it receives exactly the items added after X, once, in the
// order added (whatever their timestamps: since would miss the hour-old
// one), then an item added through A after it returned. A subscription on
// B all along receives every item with the very positions A gave.
func TestResumeAcrossGateways(t *testing.T) {
	hosts := strings.Join(cqltest.Hosts(t), ",")
	env := []string{"LISTGATE_CQL_HOSTS=" + hosts, "LISTGATE_CQL_KEYSPACE=" + resumeKeyspace}
	a := startGateway(t, append(env, "LISTGATE_MIGRATE=true")...)
	b := startGateway(t, env...)
	entityType := fmt.Sprintf("resume%d", time.Now().UnixNano()%1e9)
	createFeature(t, a, entityType)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	vars := listVars(entityType, "u1")
	const within = time.Minute // an add is delivered within a second of it on a cluster; a loaded machine may take longer

	away := subscribeFeed(t, ctx, a.base, vars)
	allAlong := subscribeFeed(t, ctx, b.base, vars)
	waitActive(t, a, 1)
	waitActive(t, b, 1)
	add := func(g *gateway, items ...[2]string) {
		t.Helper()
		addItems(t, g.base, "", entityType, "u1", "f", items...)
	}
	add(a, [2]string{"x", stamp(30 * time.Minute)}, [2]string{"x-same-add", stamp(45 * time.Minute)})
	add(b, [2]string{"seen-1", stamp(0)})
	add(a, [2]string{"seen-2-older", stamp(-10 * time.Minute)}, [2]string{"seen-2-newer", stamp(10 * time.Minute)})
	seen := away.await(5, within)
	if got, want := values(seen), []string{"x", "x-same-add", "seen-1", "seen-2-older", "seen-2-newer"}; !slices.Equal(got, want) {
		t.Fatalf("through A: %v, want %v", got, want)
	}
	x := seen[0]
	away.conn.Close()
	waitActive(t, a, 0)

	add(b, [2]string{"y", stamp(0)})
	add(b, [2]string{"hour-old", stamp(-time.Hour)})
	back := subscribeFeed(t, ctx, b.base, listVars(entityType, "u1", "after", x.position))
	missed := []string{"x-same-add", "seen-1", "seen-2-older", "seen-2-newer", "y", "hour-old"}
	if got := values(back.await(len(missed), within)); !slices.Equal(got, missed) {
		t.Fatalf("resumed through B after x: %v, want %v", got, missed)
	}
	waitActive(t, b, 2)
	add(a, [2]string{"new", stamp(0)})
	resumed := back.await(len(missed)+1, within)
	if got, want := values(resumed), append(missed, "new"); !slices.Equal(got, want) {
		t.Fatalf("resumed through B after x: %v, want %v", got, want)
	}

	// Every item's position is the same through either gateway, and no
	// two items share one.
	all := allAlong.await(len(missed)+2, within)
	if got, want := values(all), append([]string{"x"}, append(missed, "new")...); !slices.Equal(got, want) {
		t.Fatalf("on B all along: %v, want %v", got, want)
	}
	positions := map[string]string{}
	for _, it := range all {
		positions[it.value] = it.position
	}
	if n := distinctPositions(all); n != len(all) {
		t.Errorf("%d distinct positions for %d items: %v", n, len(all), positions)
	}
	for _, got := range [][]positioned{seen, resumed} {
		for _, it := range got {
			if it.position != positions[it.value] {
				t.Errorf("%s came with position %q on one subscription and %q on B's all along", it.value, it.position, positions[it.value])
			}
		}
	}
	t.Logf("x's position: %s", x.position)
}

// The embedded store's positions survive a restart: a client receives an
// item and its position; two more items are added through the same
// process, which then stops on SIGTERM; a new process on the same data
// folder adds two more, and a subscription after the position receives
// the four, once, in order, with the positions the first process gave,
// then a new one. A position of another data folder is refused there,
// and that folder's gateway refuses this one's.
func TestResumeAfterRestart(t *testing.T) {
	dir := t.TempDir()
	first := startGateway(t, "LISTGATE_DATA_DIR="+dir, "LISTGATE_SHUTDOWN_TIMEOUT=5s")
	createFeature(t, first, "user")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	vars := listVars("user", "u1")
	s := subscribeFeed(t, ctx, first.base, vars)
	waitActive(t, first, 1)
	addItems(t, first.base, "", "user", "u1", "f", [2]string{"received", stamp(0)})
	pos := s.await(1, 30*time.Second)[0].position
	addItems(t, first.base, "", "user", "u1", "f", [2]string{"before-stop-1", stamp(time.Hour)})
	addItems(t, first.base, "", "user", "u1", "f", [2]string{"before-stop-2", stamp(-time.Hour)})
	beforeStop := s.await(3, 30*time.Second)[1:]
	took := first.stopWithin(5*time.Second + 20*time.Second)
	if s.wait(10*time.Second, "the subscription's end at SIGTERM", func() bool { return s.end != "" }); !strings.HasPrefix(s.end, "complete") {
		t.Errorf("at SIGTERM the subscription ended with %q, want complete", s.end)
	}
	t.Logf("the first process exited %v after SIGTERM", took.Round(time.Millisecond))

	second := startGateway(t, "LISTGATE_DATA_DIR="+dir)
	addItems(t, second.base, "", "user", "u1", "f", [2]string{"after-restart-1", stamp(0)})
	addItems(t, second.base, "", "user", "u1", "f", [2]string{"after-restart-2", stamp(-2 * time.Hour)})
	resumed := subscribeFeed(t, ctx, second.base, listVars("user", "u1", "after", pos))
	want := []string{"before-stop-1", "before-stop-2", "after-restart-1", "after-restart-2"}
	got := resumed.await(len(want), 30*time.Second)
	if !slices.Equal(values(got), want) {
		t.Fatalf("resumed after the restart: %v, want %v", values(got), want)
	}
	for i, it := range beforeStop {
		if got[i].position != it.position {
			t.Errorf("%s came with position %q before the restart, %q after", it.value, it.position, got[i].position)
		}
	}
	waitActive(t, second, 1)
	addItems(t, second.base, "", "user", "u1", "f", [2]string{"new", stamp(0)})
	if got := values(resumed.await(len(want)+1, 30*time.Second)); !slices.Equal(got, append(want, "new")) {
		t.Fatalf("resumed after the restart: %v, want %v", got, append(want, "new"))
	}
	resumed.conn.Close()
	waitActive(t, second, 0)

	other := startGateway(t)
	createFeature(t, other, "user")
	otherPos := positionOf(t, ctx, other, "user", "u1", "elsewhere").position
	refusedWith(t, ctx, second, "a position of another data folder", listVars("user", "u1", "after", otherPos), "POSITION_EXPIRED")
	refusedWith(t, ctx, other, "a position of another data folder", listVars("user", "u1", "after", pos), "POSITION_EXPIRED")
}

// Positions refused, on both stores, over a WebSocket: one malformed
// (even text that decodes as base64, or a position cut short), or with
// since, is BAD_USER_INPUT; one the feed does not hold ends the
// subscription at once with POSITION_EXPIRED: older than
// --change-feed-retention (an embedded gateway forgets it once it is
// older, whether swept or not; a Cassandra gateway keeping the feed 6 s
// refuses what one keeping it 10 minutes accepts), of another kind of
// store or keyspace, or ahead of the feed (an embedded data folder copied
// before it was written to; a Cassandra position an hour ahead). listItems
// shows no position.
func TestResumeRefusals(t *testing.T) {
	hosts := strings.Join(cqltest.Hosts(t), ",")
	cqlEnv := []string{"LISTGATE_CQL_HOSTS=" + hosts, "LISTGATE_CQL_KEYSPACE=" + resumeKeyspace}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	expiring := startGateway(t, "LISTGATE_CHANGE_FEED_RETENTION=4s")
	createFeature(t, expiring, "user")
	expiringPos := positionOf(t, ctx, expiring, "user", "u1", "soon-old").position

	dir := t.TempDir()
	emb := startGateway(t, "LISTGATE_DATA_DIR="+dir)
	createFeature(t, emb, "user")
	early := positionOf(t, ctx, emb, "user", "u1", "early").position
	emb.stopWithin(15*time.Second + 20*time.Second) // --shutdown-timeout's default, and a margin
	old := filepath.Join(t.TempDir(), "old")
	if err := os.CopyFS(old, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	emb = startGateway(t, "LISTGATE_DATA_DIR="+dir)
	addItems(t, emb.base, "", "user", "u1", "f", [2]string{"late-1", ""})
	addItems(t, emb.base, "", "user", "u1", "f", [2]string{"late-2", ""})
	late := positionOf(t, ctx, emb, "user", "u1", "late-3").position

	cas := startGateway(t, append(cqlEnv, "LISTGATE_MIGRATE=true")...)
	entityType := fmt.Sprintf("refused%d", time.Now().UnixNano()%1e9)
	createFeature(t, cas, entityType)
	casItem := positionOf(t, ctx, cas, entityType, "u1", "c")
	casPos := casItem.position

	for _, g := range []struct {
		name, entityType, position, foreign string
		g                                   *gateway
	}{
		{"embedded", "user", late, casPos, emb},
		{"cassandra", entityType, casPos, early, cas},
	} {
		vars := func(more ...any) map[string]any { return listVars(g.entityType, "u1", more...) }
		for _, bad := range []string{"not a position", "not-a-position", "", strings.Repeat("A", 100), "AAAA", g.position + "!", g.position[:len(g.position)-2]} {
			refusedWith(t, ctx, g.g, fmt.Sprintf("%s: after %q", g.name, bad), vars("after", bad), "BAD_USER_INPUT")
		}
		refusedWith(t, ctx, g.g, g.name+": after with since", vars("after", g.position, "since", stamp(-time.Minute)), "BAD_USER_INPUT")
		refusedWith(t, ctx, g.g, g.name+": a position of the other store", vars("after", g.foreign), "POSITION_EXPIRED")

		var page struct {
			ListItems struct {
				Items []struct {
					Value    string
					Position *string
				}
			}
		}
		r := g.g.mustOK(`query($t: String!) { listItems(entityType: $t, entityId: "u1", feature: "f") { items { value position } } }`, map[string]any{"t": g.entityType})
		if err := json.Unmarshal(r.Data, &page); err != nil || len(page.ListItems.Items) == 0 {
			t.Fatalf("%s: listItems: %s (%v)", g.name, r.Data, err)
		}
		for _, it := range page.ListItems.Items {
			if it.Position != nil {
				t.Errorf("%s: listItems shows %s with position %q, want null", g.name, it.Value, *it.Position)
			}
		}
	}
	refusedWith(t, ctx, emb, "embedded: a position of another data folder", listVars("user", "u1", "after", expiringPos), "POSITION_EXPIRED")
	refusedWith(t, ctx, cas, "cassandra: a position an hour ahead", listVars(entityType, "u1", "after", aheadOf(t, casPos, time.Hour)), "POSITION_EXPIRED")
	other := startGateway(t, "LISTGATE_CQL_HOSTS="+hosts, "LISTGATE_CQL_KEYSPACE="+resumeKeyspace+"_other", "LISTGATE_MIGRATE=true")
	createFeature(t, other, entityType)
	refusedWith(t, ctx, other, "cassandra: a position of another keyspace's feed", listVars(entityType, "u1", "after", casPos), "POSITION_EXPIRED")

	// The copy of the folder holds the feed up to early: late is ahead of
	// it, early is not.
	restored := startGateway(t, "LISTGATE_DATA_DIR="+old)
	refusedWith(t, ctx, restored, "embedded: a position ahead of the feed (a folder copied before it)", listVars("user", "u1", "after", late), "POSITION_EXPIRED")
	s := subscribeFeed(t, ctx, restored.base, listVars("user", "u1", "after", early))
	waitActive(t, restored, 1)
	addItems(t, restored.base, "", "user", "u1", "f", [2]string{"restored", ""})
	if got := values(s.await(1, 30*time.Second)); !slices.Equal(got, []string{"restored"}) {
		t.Errorf("after early on the copied folder: %v, want [restored]", got)
	}

	// Kept 10 minutes here, casPos is resumed; a gateway of the same
	// cluster keeping the feed 6 s (records expire 4 s after they settle)
	// refuses it.
	s = subscribeFeed(t, ctx, cas.base, listVars(entityType, "u1", "after", casPos))
	waitActive(t, cas, 1)
	addItems(t, cas.base, "", entityType, "u1", "f", [2]string{"c-later", ""})
	if got := values(s.await(1, time.Minute)); !slices.Equal(got, []string{"c-later"}) {
		t.Errorf("after c on the gateway keeping the feed 10 minutes: %v, want [c-later]", got)
	}
	short := startGateway(t, append(cqlEnv, "LISTGATE_CHANGE_FEED_RETENTION=6s")...)
	awaitExpiry(t, ctx, short, listVars(entityType, "u1", "after", casPos), time.Minute)

	// The embedded gateway keeping its feed 4 s forgets a position once
	// it is older.
	if n := awaitExpiry(t, ctx, expiring, listVars("user", "u1", "after", expiringPos), 2*time.Minute); n == 0 {
		t.Logf("the embedded gateway had swept the position before the first try")
	}
}

// aheadOf is a Cassandra position moved d later: as a position of a
// cluster whose feed is ahead of this one's. The one place a test reads a
// position, which store/cql lays out as the kind 'c', the feed's identity
// (4 bytes), the record's time UUID ticks (100 ns, big-endian), the rest of
// its UUID, and the item.
func aheadOf(t *testing.T, position string, d time.Duration) string {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(position)
	if err != nil || len(b) != 25 || b[0] != 'c' {
		t.Fatalf("%q is not a Cassandra position as this test knows one (%v, %d bytes)", position, err, len(b))
	}
	binary.BigEndian.PutUint64(b[5:13], binary.BigEndian.Uint64(b[5:13])+uint64(d/100))
	return base64.RawURLEncoding.EncodeToString(b)
}

// Churn on each store, for 2,000 cycles or 30 s: one writer adds to list
// a over HTTP, one item an add, as fast as it can; a WebSocket client
// subscribes to list b (half the time after the position of a's last
// item received) and completes the subscription, again and again, each
// time b's only subscription, so that b is watched and left each cycle;
// a steady subscriber to a receives every item once, in the order added.
// Then every add has succeeded, /readyz is ok, and SIGTERM ends the
// process, exit code 0, well within --shutdown-timeout plus 20 s.
func TestResumeChurn(t *testing.T) {
	const (
		maxCycles       = 2000
		churnFor        = 30 * time.Second
		shutdownTimeout = 3 * time.Second
	)
	for _, backend := range []string{"embedded", "cassandra"} {
		t.Run(backend, func(t *testing.T) {
			env := []string{"LISTGATE_SHUTDOWN_TIMEOUT=" + shutdownTimeout.String()}
			if backend == "cassandra" {
				env = append(env, "LISTGATE_CQL_HOSTS="+strings.Join(cqltest.Hosts(t), ","), "LISTGATE_CQL_KEYSPACE="+resumeKeyspace, "LISTGATE_MIGRATE=true")
			}
			g := startGateway(t, env...)
			entityType := fmt.Sprintf("churn%d", time.Now().UnixNano()%1e9)
			createFeature(t, g, entityType)
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			steady := subscribeFeed(t, ctx, g.base, listVars(entityType, "a"))
			waitActive(t, g, 1)

			stop, wrote := make(chan struct{}), make(chan int, 1)
			go func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						wrote <- i
						return
					default:
					}
					r := g.do(`mutation($t: String!, $v: ListValue!) { addListItems(list: {entityType: $t, entityId: "a", feature: "f"}, items: [{value: $v}]) { added } }`,
						map[string]any{"t": entityType, "v": fmt.Sprintf("a-%06d", i)})
					if p := r.Problem(); p != "" {
						t.Errorf("add %d: %s", i, p)
						wrote <- i
						return
					}
				}
			}()

			churn, err := wsclient.Dial(ctx, g.base, "")
			if err != nil {
				t.Fatal(err)
			}
			defer churn.Close()
			var (
				mu         sync.Mutex
				unexpected []string
			)
			go func() {
				for {
					m, err := churn.Read(ctx)
					if err != nil {
						return
					}
					mu.Lock()
					unexpected = append(unexpected, fmt.Sprintf("%s %s %s", m.Type, m.ID, m.Payload))
					mu.Unlock()
				}
			}()
			watched := func(n float64) {
				t.Helper()
				deadline := time.Now().Add(30 * time.Second)
				for metric(t, g.base, "listgate_subscription_lists_watched") != n {
					if time.Now().After(deadline) {
						t.Fatalf("not %v lists watched within 30 s", n)
					}
					time.Sleep(time.Millisecond)
				}
			}
			began, cycles, resumed := time.Now(), 0, 0
			for ; cycles < maxCycles && time.Since(began) < churnFor; cycles++ {
				vars := listVars(entityType, "b")
				steady.mu.Lock()
				if n := len(steady.items); n > 0 && cycles%2 == 1 {
					vars["after"] = steady.items[n-1].position
					resumed++
				}
				steady.mu.Unlock()
				id := fmt.Sprint(cycles)
				if err := churn.Subscribe(ctx, id, listItemsResume, vars); err != nil {
					t.Fatal(err)
				}
				watched(2)
				if err := churn.Complete(ctx, id); err != nil {
					t.Fatal(err)
				}
				watched(1)
			}
			churned := time.Since(began)
			close(stop)
			adds := <-wrote
			if t.Failed() {
				return
			}
			items := steady.await(adds, 2*time.Minute)
			for i, it := range items {
				if want := fmt.Sprintf("a-%06d", i); it.value != want {
					t.Fatalf("the steady subscriber's item %d is %s, want %s: not each once in the order added", i, it.value, want)
				}
			}
			if n := distinctPositions(items); n != len(items) {
				t.Errorf("%d distinct positions for %d items", n, len(items))
			}
			mu.Lock()
			if len(unexpected) > 0 {
				t.Errorf("the churning client received %d messages, the first %s", len(unexpected), unexpected[0])
			}
			mu.Unlock()
			if code, _ := readyz(t, g.base); code != http.StatusOK {
				t.Errorf("/readyz answered %d after the churn", code)
			}
			took := g.stopWithin(shutdownTimeout + 20*time.Second)
			t.Logf("%d subscribe and complete cycles (%d after a position) in %v, while %d adds; SIGTERM: exit code 0 after %v (--shutdown-timeout %v)",
				cycles, resumed, churned.Round(time.Millisecond), adds, took.Round(time.Millisecond), shutdownTimeout)
		})
	}
}
