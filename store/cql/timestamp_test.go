package cql_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/listgate/listgate/internal/cqltest"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/cql"
)

// TestRetriedWritesKeepTheirTimestamp cuts the connection under the first
// write of AddItems, RemoveValues and RemoveAll just after the statement is
// sent, so the driver tries it again, and checks on the wire that every
// attempt of one operation carried the same client timestamp: a retry is the
// same write, not a later one. The server holds the added items at that
// timestamp, and each operation's timestamp is later than the one before.
func TestRetriedWritesKeepTheirTimestamp(t *testing.T) {
	ctx := context.Background()
	cfg := cqltest.Config(t)
	w := &wire{prepared: map[string]string{}}
	s, err := cql.OpenTuned(ctx, cfg, func(c *gocql.ClusterConfig) {
		c.ProtoVersion = 4 // frames without version 5's segments, for the wire to read
		c.Dialer = w
		// On one node the store's policy (retry on the next host) has no
		// host left to retry on; on a cluster it sends the statement again
		// to another coordinator, a new attempt just like this one.
		c.RetryPolicy = retrySameHost{}
		// A second connection to the node carries the retry while the cut
		// one is dialled again.
		c.NumConns = 2
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	f, err := s.CreateFeature(ctx, store.Feature{
		EntityType: fmt.Sprintf("ts%d", time.Now().UnixNano()%1e12), Name: "history", ValueType: store.String, TTL: 24 * time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	l := store.List{Feature: &f, EntityID: "u1"}
	now := time.Now()
	items := []store.NewItem{
		{Timestamp: now.UnixNano(), Value: []byte("a")},
		{Timestamp: now.Add(-time.Second).UnixNano(), Value: []byte("target")},
		{Timestamp: now.Add(-2 * time.Second).UnixNano(), Value: []byte("target")},
	}

	add := w.attempts(t, "AddItems", func() error {
		res, err := s.AddItems(ctx, l, items)
		if err == nil && res.Added != len(items) {
			err = fmt.Errorf("added %d, want %d", res.Added, len(items))
		}
		return err
	})
	// What the server holds was written at the operation's timestamp.
	raw := rawSession(t, cfg)
	iter := raw.Query("SELECT item_key, WRITETIME(value) FROM "+cfg.Keyspace+".list_items WHERE feature_key = ? AND entity_id = ?",
		f.Key(), l.EntityID).Iter()
	var key string
	var written int64
	rows := 0
	for iter.Scan(&key, &written) {
		rows++
		if written != add {
			t.Errorf("item %s: WRITETIME %d, want the operation's timestamp %d", key, written, add)
		}
	}
	if err := iter.Close(); err != nil {
		t.Fatal(err)
	}
	if rows != len(items) {
		t.Fatalf("%d items stored, want %d", rows, len(items))
	}

	remove := w.attempts(t, "RemoveValues", func() error {
		n, err := s.RemoveValues(ctx, l, [][]byte{[]byte("target")}, store.Window{}, 100_000)
		if err == nil && n != 2 {
			err = fmt.Errorf("removed %d, want 2", n)
		}
		return err
	})
	all := w.attempts(t, "RemoveAll", func() error { return s.RemoveAll(ctx, l) })
	if !(add < remove && remove < all) {
		t.Errorf("timestamps out of order: AddItems %d, RemoveValues %d, RemoveAll %d", add, remove, all)
	}
	p, err := s.Items(ctx, l, store.Range{Limit: 10})
	if err != nil || len(p.Items) != 0 {
		t.Fatalf("after RemoveAll: %d items, %v", len(p.Items), err)
	}
}

// retrySameHost retries any failed statement on the same host, every
// 50 ms for 10 s at most: until the pool has a connection again (on a
// loaded machine the cut one takes more than a few tries to be replaced).
type retrySameHost struct{}

func (retrySameHost) Attempt(q gocql.RetryableQuery) bool {
	if q.Attempts() > 1 {
		time.Sleep(50 * time.Millisecond) // let the pool replace the cut connection
	}
	return q.Attempts() <= 200
}
func (retrySameHost) GetRetryType(error) gocql.RetryType { return gocql.Retry }

func rawSession(t *testing.T, cfg cql.Config) *gocql.Session {
	t.Helper()
	c := gocql.NewCluster(cfg.Hosts...)
	c.Timeout = cfg.Timeout
	c.Consistency = gocql.LocalQuorum
	session, err := c.CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(session.Close)
	return session
}

// wire reads the store's connections at the CQL protocol (version 4) level.
// It learns which statement each prepared id stands for and, while armed,
// records the client timestamp of every write to list_items sent, cutting
// the connection that carried the first of them once it is sent.
type wire struct {
	mu       sync.Mutex
	prepared map[string]string // prepared id → statement
	armed    bool
	cut      bool
	sent     []sentWrite
	errs     []string
	conns    int // connections dialled
	open     int // connections not yet closed
	peak     int // most connections open at once: the pool when full
}

type sentWrite struct {
	stmt string // the statement, or BATCH
	ts   int64  // the frame's client timestamp, µs
	conn int
}

// attempts runs one operation with the wire armed, checks that it succeeded
// after more than one attempt and that all attempts carried one timestamp,
// and returns that timestamp.
func (w *wire) attempts(t *testing.T, name string, op func() error) int64 {
	t.Helper()
	// Start with the pool full again, so that the cut leaves a connection
	// for the retry.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		w.mu.Lock()
		full := w.open >= w.peak
		w.mu.Unlock()
		if full {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the driver did not dial the cut connection again within 10s", name)
		}
	}
	w.mu.Lock()
	w.armed, w.cut, w.sent = true, false, nil
	w.mu.Unlock()
	err := op()
	w.mu.Lock()
	sent, errs := w.sent, w.errs
	w.armed = false
	w.mu.Unlock()
	if len(errs) > 0 {
		t.Fatalf("%s: reading the wire: %s", name, strings.Join(errs, "; "))
	}
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(sent) < 2 {
		t.Fatalf("%s: %d write attempts sent, want the cut one and a retry: %+v", name, len(sent), sent)
	}
	for _, a := range sent[1:] {
		if a.ts != sent[0].ts {
			t.Errorf("%s: attempts carried different timestamps, so a retry is a new write: %+v", name, sent)
			break
		}
	}
	if d := time.Since(time.UnixMicro(sent[0].ts)); d < 0 || d > time.Minute {
		t.Errorf("%s: timestamp %d is %v from now: misread frame?", name, sent[0].ts, d)
	}
	return sent[0].ts
}

func (w *wire) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.conns++
	w.open++
	w.peak = max(w.peak, w.open)
	return &wireConn{Conn: c, w: w, id: w.conns, pending: map[uint16]string{}}, nil
}

func (w *wire) fail(format string, args ...any) {
	w.mu.Lock()
	w.errs = append(w.errs, fmt.Sprintf(format, args...))
	w.mu.Unlock()
}

// request notes a write frame about to be sent and says whether to cut its
// connection once it is.
func (w *wire) request(c *wireConn, opcode byte, body []byte) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	stmt := "BATCH"
	if opcode == opExecute {
		id, ok := shortBytes(body)
		if !ok {
			w.errs = append(w.errs, "short EXECUTE frame")
			return false
		}
		stmt = w.prepared[string(id)]
	}
	if !w.armed || len(body) < 8 || !(stmt == "BATCH" || strings.Contains(stmt, ".list_items") && !strings.HasPrefix(stmt, "SELECT")) {
		return false
	}
	// With the default timestamp flag set, which the driver always sets,
	// the timestamp ends a version 4 EXECUTE or BATCH frame.
	w.sent = append(w.sent, sentWrite{stmt: stmt, ts: int64(binary.BigEndian.Uint64(body[len(body)-8:])), conn: c.id})
	if w.cut {
		return false
	}
	w.cut = true
	return true
}

const (
	opResult  = 0x08
	opPrepare = 0x09
	opExecute = 0x0A
	opBatch   = 0x0D
)

type wireConn struct {
	net.Conn
	w       *wire
	id      int
	mu      sync.Mutex
	out, in []byte
	pending map[uint16]string // stream → statement being prepared
	closed  sync.Once
	dead    atomic.Bool // cut: nothing more is read
}

func (c *wireConn) Close() error {
	c.closed.Do(func() {
		c.w.mu.Lock()
		c.w.open--
		c.w.mu.Unlock()
	})
	return c.Conn.Close()
}

func (c *wireConn) Write(p []byte) (int, error) {
	cut := false
	c.mu.Lock()
	c.out = append(c.out, p...)
	for {
		_, stream, opcode, body, ok := c.frame(&c.out)
		if !ok {
			break
		}
		switch opcode {
		case opPrepare:
			if q, ok := longString(body); ok {
				c.pending[stream] = q
			}
		case opExecute, opBatch:
			cut = c.w.request(c, opcode, body) || cut
		}
	}
	c.mu.Unlock()
	if cut {
		c.dead.Store(true) // before the write, so that no answer to it is read
	}
	n, err := c.Conn.Write(p)
	if cut {
		c.Close() // the statement is on its way; its answer will not come
	}
	return n, err
}

func (c *wireConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.dead.Load() {
		return 0, net.ErrClosed
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.in = append(c.in, p[:n]...)
	for {
		flags, stream, opcode, body, ok := c.frame(&c.in)
		if !ok {
			break
		}
		q, prepare := c.pending[stream]
		if opcode != opResult || !prepare {
			continue
		}
		delete(c.pending, stream)
		if id, ok := preparedID(flags, body); ok {
			c.w.mu.Lock()
			c.w.prepared[string(id)] = q
			c.w.mu.Unlock()
		}
	}
	return n, err
}

// frame cuts one whole frame off the front of *buf.
func (c *wireConn) frame(buf *[]byte) (flags byte, stream uint16, opcode byte, body []byte, ok bool) {
	b := *buf
	if len(b) < 9 {
		return 0, 0, 0, nil, false
	}
	if v := b[0] &^ 0x80; v != 4 {
		c.w.fail("protocol version %d frame", v)
		*buf = nil
		return 0, 0, 0, nil, false
	}
	n := int(binary.BigEndian.Uint32(b[5:9]))
	if len(b) < 9+n {
		return 0, 0, 0, nil, false
	}
	body = append([]byte(nil), b[9:9+n]...)
	*buf = append(b[:0:0], b[9+n:]...)
	return b[1], binary.BigEndian.Uint16(b[2:4]), b[4], body, true
}

// preparedID reads the id from a RESULT frame of kind Prepared.
func preparedID(flags byte, b []byte) ([]byte, bool) {
	if flags&0x01 != 0 { // compressed: the store sets no compressor
		return nil, false
	}
	if flags&0x02 != 0 { // tracing id
		if len(b) < 16 {
			return nil, false
		}
		b = b[16:]
	}
	if flags&0x08 != 0 { // warnings: [string list]
		if len(b) < 2 {
			return nil, false
		}
		n := int(binary.BigEndian.Uint16(b))
		b = b[2:]
		for range n {
			if len(b) < 2 || len(b) < 2+int(binary.BigEndian.Uint16(b)) {
				return nil, false
			}
			b = b[2+int(binary.BigEndian.Uint16(b)):]
		}
	}
	if flags&0x04 != 0 { // custom payload: not sent to this client
		return nil, false
	}
	if len(b) < 4 || binary.BigEndian.Uint32(b) != 4 { // kind Prepared
		return nil, false
	}
	return shortBytes(b[4:])
}

func shortBytes(b []byte) ([]byte, bool) {
	if len(b) < 2 || len(b) < 2+int(binary.BigEndian.Uint16(b)) {
		return nil, false
	}
	return b[2 : 2+int(binary.BigEndian.Uint16(b))], true
}

func longString(b []byte) (string, bool) {
	if len(b) < 4 || len(b) < 4+int(binary.BigEndian.Uint32(b)) {
		return "", false
	}
	return string(b[4 : 4+int(binary.BigEndian.Uint32(b))]), true
}
