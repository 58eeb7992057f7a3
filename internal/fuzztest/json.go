package fuzztest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
)

// SameJSON reports how input, which a parser accepted, says something
// other than enc, the encoding of what the parser read: input must be one
// JSON object and nothing after it, each of its keys given once and
// present in enc, with an equal value (numbers by value: -0 is 0). A key
// of enc that input leaves out is not checked (it reads as the zero value).
func SameJSON(input, enc []byte) error {
	keys, err := ObjectKeys(input)
	if err != nil {
		return err
	}
	var got, want map[string]any
	if err := unmarshalNumbers(input, &got); err != nil {
		return err
	}
	if err := unmarshalNumbers(enc, &want); err != nil {
		return err
	}
	for _, k := range keys {
		w, ok := want[k]
		if !ok {
			return fmt.Errorf("key %q is not the encoder's", k)
		}
		if !reflect.DeepEqual(Numbers(got[k]), Numbers(w)) {
			return fmt.Errorf("key %q: %v, read as %v", k, got[k], w)
		}
	}
	return nil
}

// ObjectKeys returns the keys of the JSON object data, in order, and fails
// on a key given twice or anything after the object.
func ObjectKeys(data []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object (%v)", err)
	}
	var keys []string
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k := tok.(string)
		if seen[k] {
			return nil, fmt.Errorf("key %q given twice", k)
		}
		seen[k] = true
		keys = append(keys, k)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("more after the object (%v)", err)
	}
	return keys, nil
}

func unmarshalNumbers(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return dec.Decode(v)
}

// Numbers returns v, a value decoded with json.Decoder.UseNumber, with its
// whole numbers as int64, so that equal values compare equal.
func Numbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return n
		}
		return v.String()
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = Numbers(e)
		}
		return out
	}
	return v
}
