// Package operation is the state of one GraphQL operation, whatever
// carried it (a POST, a GET, or one message of a WebSocket): who called,
// what the lists service reads for it, what it has learned about itself
// for its log line and metrics, and what must be given back when it ends.
// The endpoint makes one per operation; the guards and resolvers read it.
// A WebSocket connection holds only its principal and its subscriptions,
// never an operation's state.
package operation

import (
	"context"
	"sync"
	"time"

	"github.com/listgate/listgate/auth"
	"github.com/listgate/listgate/lists"
)

// Transports an operation can arrive by.
const (
	POST      = "post"
	GET       = "get"
	WebSocket = "websocket"
)

// Operation is one GraphQL operation's state.
type Operation struct {
	Transport string
	Start     time.Time
	Principal *auth.Principal // nil until authenticated
	// Caller names who is calling, namespaced by kind so that names of
	// different kinds never meet: key:<API key name>, jwt:<iss>/<sub>,
	// or addr:<IP> when nobody authenticated (development).
	Caller string
	// Cost is the operation's complexity, as the guards measured it.
	Cost int64
	// Quota is its caller's cost budget as the operation found it, when
	// one applies: what the answer's RateLimit headers and extensions.cost
	// say.
	Quota Quota
	// AskedCost is set when the request asked for extensions.cost
	// ("extensions": {"cost": true}), in every answer, a refusal too.
	AskedCost bool
	// Envelope is what the message that carries each of its responses
	// adds to it (a WebSocket message's type and id): --max-response-bytes
	// bounds the two together.
	Envelope int

	reads lists.Reads // the lists service's part: loader, response byte budget

	mu        sync.Mutex
	name, typ string
	codes     []string
	canceled  bool
	streamErr error
	produce   func() // makes a subscription's next result (SetProducer)
	onEnd     []func()
	ended     bool
}

// New starts an operation that arrived by transport at start.
func New(transport string, start time.Time) *Operation {
	return &Operation{Transport: transport, Start: start}
}

type key struct{}

// With returns a context carrying op, in which the lists service reads
// for op alone.
func With(ctx context.Context, op *Operation) context.Context {
	return lists.WithReads(context.WithValue(ctx, key{}, op), &op.reads)
}

// From returns the operation of ctx, or nil.
func From(ctx context.Context) *Operation {
	op, _ := ctx.Value(key{}).(*Operation)
	return op
}

// SetName records the operation's name and type (query, mutation,
// subscription).
func (op *Operation) SetName(name, typ string) {
	op.mu.Lock()
	op.name, op.typ = name, typ
	op.mu.Unlock()
}

// Name returns the operation's name and type, as recorded.
func (op *Operation) Name() (name, typ string) {
	op.mu.Lock()
	defer op.mu.Unlock()
	return op.name, op.typ
}

// AddCode records the code of an error the operation answered.
func (op *Operation) AddCode(code string) {
	op.mu.Lock()
	op.codes = append(op.codes, code)
	op.mu.Unlock()
}

// Canceled records that the client went away before the answer.
func (op *Operation) Canceled() {
	op.mu.Lock()
	op.canceled = true
	op.mu.Unlock()
}

// Outcome is "canceled" when the client went away, else "ok" or the code
// of the operation's first error. A client that cancels is no failure of
// the gateway: it must not count against availability.
func (op *Operation) Outcome() string {
	op.mu.Lock()
	defer op.mu.Unlock()
	switch {
	case op.canceled:
		return "canceled"
	case len(op.codes) == 0:
		return "ok"
	}
	return op.codes[0]
}

// EndStream records the error that ended a subscription's stream.
func (op *Operation) EndStream(err error) {
	op.mu.Lock()
	op.streamErr = err
	op.mu.Unlock()
}

// StreamErr is the error that ended a subscription's stream, or nil.
func (op *Operation) StreamErr() error {
	op.mu.Lock()
	defer op.mu.Unlock()
	return op.streamErr
}

// SetProducer has a subscription's results made by the goroutine that
// sends them, each when it asks for it (Produce), rather than by a
// goroutine of the resolver's own waiting beside it: an idle subscription
// then costs one goroutine, not two. produce puts the stream's next
// result in the channel the resolver returned, or closes it, waiting
// until there is one or the operation's context ends; it does nothing
// while a result it made has not been taken.
func (op *Operation) SetProducer(produce func()) {
	op.mu.Lock()
	op.produce = produce
	op.mu.Unlock()
}

// Produce makes the stream's next result, if a resolver set a producer.
// The goroutine that sends the results calls it before it takes each.
func (op *Operation) Produce() {
	op.mu.Lock()
	produce := op.produce
	op.mu.Unlock()
	if produce != nil {
		produce()
	}
}

// OnEnd has f run when the operation ends (what it holds to run is given
// back), or at once if it has ended. A query or mutation ends once its
// answer is made, before it is written: a client that reads it slowly
// holds none of that meanwhile.
func (op *Operation) OnEnd(f func()) {
	op.mu.Lock()
	if !op.ended {
		op.onEnd = append(op.onEnd, f)
		op.mu.Unlock()
		return
	}
	op.mu.Unlock()
	f()
}

// End runs what OnEnd registered, last first, once.
func (op *Operation) End() {
	op.mu.Lock()
	fs := op.onEnd
	op.onEnd, op.ended = nil, true
	op.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}
