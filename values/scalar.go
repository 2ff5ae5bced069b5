package values

import (
	"io"

	"github.com/listgate/listgate/store"
)

// Value is the GraphQL ListValue scalar. Read from a list it holds stored
// bytes and their type; received from a client it holds the raw input,
// which Encode checks once the feature (and so the type) is known.
type Value struct {
	Type  store.ValueType
	Bytes []byte
	Raw   any
}

// MarshalGQL writes the value as JSON, as AppendJSON does.
func (v Value) MarshalGQL(w io.Writer) {
	var buf [128]byte
	w.Write(AppendJSON(buf[:0], v.Type, v.Bytes))
}

// UnmarshalGQL keeps the input for Encode.
func (v *Value) UnmarshalGQL(in any) error {
	v.Raw = in
	return nil
}
