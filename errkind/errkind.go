// Package errkind names the kinds of error every layer of listgate raises.
// An error wraps at most one kind, with fmt.Errorf("%w …"); the GraphQL
// error presenter alone maps a kind to the code a client sees. The kinds
// know nothing of GraphQL or HTTP. An error quotes what a client sent
// through Quote or Clip alone, so that every message is short.
package errkind

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

var (
	// Invalid: the input can never succeed as given. Nothing was written.
	Invalid = errors.New("invalid")
	// Coercion is an Invalid argument GraphQL could not coerce to its
	// type; the error presenter names the argument.
	Coercion = fmt.Errorf("%w", Invalid)
	// Malformed: the request itself is not one the gateway reads (not
	// JSON, a wrong content type or method). Nothing was run.
	Malformed = errors.New("malformed request")
	// NotFound: what the input names does not exist.
	NotFound = errors.New("not found")
	// Conflict: the feature exists, or cannot be re-created yet.
	Conflict = errors.New("conflict")
	// Unavailable: the database could not answer in time; the call may be
	// retried. Its message may carry the driver's words, which only the
	// log shows.
	Unavailable = errors.New("unavailable")
	// Refused is an Unavailable the gateway decides itself: it is shutting
	// down, at a bound of its own, or its catalog is too old to write
	// under. Its message is the gateway's, shown as it is, and says what
	// to do.
	Refused = fmt.Errorf("%w", Unavailable)
	// Timeout: the request's deadline passed before it could answer.
	Timeout = errors.New("timeout")
	// Unauthenticated: no credentials, or credentials that are not valid.
	Unauthenticated = errors.New("unauthenticated")
	// Forbidden: the caller may not do what it asked.
	Forbidden = errors.New("forbidden")
	// TooSlow: a subscription's client reads its items more slowly than
	// they come; it subscribes again, after the position it reached, to
	// go on.
	TooSlow = errors.New("too slow")
	// PositionExpired: the change feed no longer holds every add after
	// the position a subscription asked to resume from.
	PositionExpired = errors.New("position expired")
	// Throttled: the caller has spent its budget, or holds its share of
	// the gateway; its message says when to retry.
	Throttled = errors.New("throttled")
	// ClockSkew: the gateway cannot bound how far apart the cluster's
	// clocks are within --max-clock-offset, so it starts no subscription,
	// whose order rests on them; adds go on. Retry later.
	ClockSkew = errors.New("clock skew")
)

// DeadlinePassed is the error of an operation whose deadline passed before
// it could answer.
var DeadlinePassed = fmt.Errorf("%w: the request ran past its deadline (--request-timeout) before it could answer", Timeout)

// MaxQuoted is the most bytes of what a client sent that an error message
// quotes: enough to recognize a value, never enough that a value used by
// many fields, each failing with its own error, multiplies the answer.
const MaxQuoted = 64

// Clip is what an error message shows of a name or value a client sent:
// all of it up to MaxQuoted bytes, else its first MaxQuoted bytes (cut
// where a character starts) and "…".
func Clip(s string) string {
	if len(s) <= MaxQuoted {
		return s
	}
	n := MaxQuoted
	for n > MaxQuoted-utf8.UTFMax && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Quote is Clip(s) as a quoted Go string, as error messages quote a name
// or value a client sent.
func Quote(s string) string { return strconv.Quote(Clip(s)) }
