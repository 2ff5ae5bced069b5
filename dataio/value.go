package dataio

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/values"
)

// Value is a row's value as its file holds it. In NDJSON it is the JSON
// value the GraphQL ListValue scalar reads and writes. In CSV and Parquet
// it is text, by the feature's value type: a STRING's characters, an
// INT's decimal digits, a FLOAT's JSON number, true or false, a BYTES
// value's standard base64 (with padding), a JSON value's JSON text. Which
// it is can only be told once the feature is known, so a value read stays
// as read until Input.
type Value struct {
	form   valueForm
	json   []byte          // jsonForm: the JSON value
	text   string          // textForm: the text
	typ    store.ValueType // storedForm: the type and the stored bytes
	stored []byte
}

type valueForm uint8

const (
	noValue valueForm = iota
	jsonForm
	textForm
	storedForm
)

// JSONValue is a value as NDJSON holds it.
func JSONValue(raw []byte) Value { return Value{form: jsonForm, json: raw} }

// TextValue is a value as CSV and Parquet hold it.
func TextValue(s string) Value { return Value{form: textForm, text: s} }

// StoredValue is a value as a store holds it: canonical bytes of type t.
// Writers write it in each format's form.
func StoredValue(t store.ValueType, b []byte) Value {
	return Value{form: storedForm, typ: t, stored: b}
}

// Input is the value as GraphQL decodes a ListValue sent as a variable,
// for values.Encode with the feature's type t; an error wrapping
// errkind.Invalid says why text is no value of type t.
func (v Value) Input(t store.ValueType) (any, error) {
	switch v.form {
	case jsonForm:
		return decodeJSON(v.json)
	case textForm:
		return textInput(t, v.text)
	case storedForm:
		if t != v.typ {
			return nil, fmt.Errorf("%w value: a %s value, for a %s feature", errkind.Invalid, v.typ, t)
		}
		return decodeJSON(values.AppendJSON(nil, v.typ, v.stored))
	}
	return nil, fmt.Errorf("%w value: none", errkind.Invalid)
}

// textInput reads the text of a value of type t.
func textInput(t store.ValueType, s string) (any, error) {
	switch t {
	case store.String, store.Bytes:
		return s, nil
	case store.Int:
		// values.Encode takes an INT sent as a string of its digits over
		// the whole 64-bit range, and nothing else as a string.
		return s, nil
	case store.Float:
		return json.Number(s), nil
	case store.Boolean:
		switch s {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, fmt.Errorf("%w ListValue %s: this feature holds BOOLEAN values, written as true or false", errkind.Invalid, errkind.Quote(s))
	case store.JSON:
		v, err := decodeJSON([]byte(s))
		if err != nil {
			return nil, fmt.Errorf("%w ListValue %s: this feature holds JSON values, written as their JSON text: %v", errkind.Invalid, errkind.Quote(s), err)
		}
		return v, nil
	}
	return nil, fmt.Errorf("%w value type %s", errkind.Invalid, errkind.Quote(string(t)))
}

// decodeJSON decodes one JSON value as gqlgen decodes variables: numbers
// as json.Number.
func decodeJSON(b []byte) (any, error) {
	if !utf8.Valid(b) {
		// encoding/json would replace the invalid bytes.
		return nil, fmt.Errorf("%w value: not valid UTF-8", errkind.Invalid)
	}
	// Scalars, most values, without a decoder's buffers.
	if v := jsontext.Value(bytes.TrimSpace(b)); len(v) > 0 && v.IsValid() {
		switch v.Kind() {
		case '"':
			s, err := jsontext.AppendUnquote(nil, v)
			if err == nil {
				return string(s), nil
			}
		case '0':
			return json.Number(v), nil
		case 't':
			return true, nil
		case 'f':
			return false, nil
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w value: not JSON: %v", errkind.Invalid, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w value: more than one JSON value", errkind.Invalid)
	}
	return v, nil
}

// appendJSON appends the value's JSON form, as NDJSON holds it.
func (v Value) appendJSON(dst []byte) ([]byte, error) {
	switch v.form {
	case jsonForm:
		return append(dst, v.json...), nil
	case storedForm:
		return values.AppendJSON(dst, v.typ, v.stored), nil
	case textForm:
		return nil, errors.New("a value read as text has no JSON form until its feature's type is known: convert it with its feature's type")
	}
	return nil, errors.New("a row without a value")
}

// appendText appends the value's text, as CSV and Parquet hold it.
func (v Value) appendText(dst []byte) ([]byte, error) {
	switch v.form {
	case textForm:
		return append(dst, v.text...), nil
	case storedForm:
		return AppendText(dst, v.typ, v.stored), nil
	case jsonForm:
		return nil, errors.New("a value read as JSON has no text form until its feature's type is known: convert it with its feature's type")
	}
	return nil, errors.New("a row without a value")
}

// AppendText appends the text of stored bytes of type t: the stored bytes
// themselves (STRING's UTF-8, INT's digits, FLOAT's shortest JSON number,
// true or false, JSON's canonical JSON), but BYTES as standard base64.
func AppendText(dst []byte, t store.ValueType, b []byte) []byte {
	if t == store.Bytes {
		return base64.StdEncoding.AppendEncode(dst, b)
	}
	return append(dst, b...)
}
