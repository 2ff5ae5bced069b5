package cql

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// slowLog logs the statements slower than --slow-query without flooding
// the log when the cluster slows under load: a slow statement after a
// quiet interval is logged at once, in a line of its own; those that come
// within slowLogInterval of it are counted, and when the interval ends one
// line says how many there were and shows the slowest of them. So a
// cluster that is slow for minutes logs a line every interval, not one per
// statement (thousands a second).
//
// mu guards every field but log and interval; no call out is made under
// it: lines are logged once it is let go.
type slowLog struct {
	log      *slog.Logger
	interval time.Duration

	mu      sync.Mutex
	until   time.Time     // the end of the interval under way; zero: none
	count   int           // slow statements in it not logged yet
	slowest slowStatement // the slowest of them
	timer   *time.Timer   // logs them when the interval ends; nil when none wait
	closed  bool
}

// slowLogInterval is how long a slow statement's line stands for those
// that follow it.
const slowLogInterval = 10 * time.Second

// slowStatement is what a slow statement's line shows.
type slowStatement struct {
	ctx       context.Context // its request's, for the line's request_id and trace_id
	statement string
	query     string
	took      time.Duration
	host      string
	attempt   int
	err       error
}

func newSlowLog(log *slog.Logger, interval time.Duration) *slowLog {
	return &slowLog{log: log, interval: interval}
}

// record logs st, or counts it towards the interval's line.
func (l *slowLog) record(st slowStatement, now time.Time) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	if l.count == 0 && !now.Before(l.until) {
		l.until = now.Add(l.interval)
		l.mu.Unlock()
		l.log.WarnContext(st.ctx, "slow CQL statement", "statement", st.statement, "query", st.query,
			"duration", st.took, "host", st.host, "attempt", st.attempt, "err", st.err)
		return
	}
	l.count++
	if st.took > l.slowest.took {
		l.slowest = st
	}
	if l.timer == nil {
		l.timer = time.AfterFunc(l.until.Sub(now), l.flush)
	}
	l.mu.Unlock()
}

// flush logs the statements counted in the interval that ended, and
// begins the next: one that comes in it is counted too.
func (l *slowLog) flush() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	count, slowest := l.count, l.slowest
	l.count, l.slowest, l.timer = 0, slowStatement{}, nil
	l.until = time.Now().Add(l.interval)
	l.mu.Unlock()
	l.write(count, slowest)
}

// close logs what is counted, and stops the timer: nothing more is
// counted or logged once it has.
func (l *slowLog) close() {
	l.mu.Lock()
	count, slowest := l.count, l.slowest
	if l.timer != nil {
		l.timer.Stop()
	}
	l.count, l.slowest, l.timer, l.closed = 0, slowStatement{}, nil, true
	l.mu.Unlock()
	l.write(count, slowest)
}

func (l *slowLog) write(count int, slowest slowStatement) {
	if count == 0 {
		return
	}
	l.log.WarnContext(context.WithoutCancel(slowest.ctx), "slow CQL statements since the last such line; the slowest of them shown",
		"slow", count, "within", l.interval, "statement", slowest.statement, "query", slowest.query,
		"duration", slowest.took, "host", slowest.host, "attempt", slowest.attempt, "err", slowest.err)
}
