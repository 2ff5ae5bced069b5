package model

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/99designs/gqlgen/graphql"

	"github.com/listgate/listgate/errkind"
)

// MarshalInt32 writes GraphQL's Int.
func MarshalInt32(i int32) graphql.Marshaler {
	return graphql.WriterFunc(func(w io.Writer) { io.WriteString(w, strconv.FormatInt(int64(i), 10)) })
}

// UnmarshalInt32 reads GraphQL's Int as the spec coerces it: an integer
// within 32 bits, never a string ("2") or a number with a fraction (1.0).
// An error quotes the start of what was sent.
func UnmarshalInt32(v any) (int32, error) {
	var n int64
	switch v := v.(type) {
	case int:
		n = int64(v)
	case int32:
		return v, nil
	case int64:
		n = v
	case json.Number:
		i, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w Int %s: not an integer; send a number without fraction or exponent, from %d to %d", errkind.Coercion, errkind.Clip(string(v)), math.MinInt32, math.MaxInt32)
		}
		n = i
	case string:
		return 0, fmt.Errorf("%w Int %s: a string; send the number itself, without quotes", errkind.Coercion, errkind.Quote(v))
	default:
		return 0, fmt.Errorf("%w Int: %s (%T) is not an integer", errkind.Coercion, errkind.Clip(fmt.Sprint(v)), v)
	}
	if n < math.MinInt32 || n > math.MaxInt32 {
		return 0, fmt.Errorf("%w Int %d: out of range, from %d to %d", errkind.Coercion, n, math.MinInt32, math.MaxInt32)
	}
	return int32(n), nil
}
