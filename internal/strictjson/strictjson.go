// Package strictjson reads a JSON object into a struct the way seqkeeper
// reads untrusted input (HTTP request bodies, export lines): only as
// encoding/json would write that struct. encoding/json alone reads, without
// an error, input that says something other than what it decodes to:
//
//   - more after the object when decoding from a stream ({...}] or {...}{...});
//   - a key given twice: the last wins, where another reader may take the first;
//   - a key in another case ("NAME" for "name");
//   - null for a number, a string or a bool: the zero value;
//   - an array of another length for a Go array: extra elements are dropped,
//     missing ones are zero.
//
// Decode refuses all of these, and unknown keys. Values of a type with its
// own UnmarshalJSON are left to it.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// Decode reads data, one JSON object and nothing after it, into the
// struct v points to.
func Decode(data []byte, v any) error {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("strictjson: decode into %T, not a pointer to a struct", v)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("more after the JSON object")
	}
	if err := check(raw, t.Elem(), ""); err != nil {
		return err
	}
	dec = json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// check walks raw, a JSON value to be decoded into a value of type t at
// path (for errors), for what Decode refuses.
func check(raw json.RawMessage, t reflect.Type, path string) error {
	if reflect.PointerTo(t).Implements(unmarshaler) {
		return nil
	}
	if bytes.Equal(raw, []byte("null")) {
		switch t.Kind() {
		case reflect.Slice, reflect.Map, reflect.Pointer, reflect.Interface:
			return nil
		}
		return fmt.Errorf("%s: null, want a value", where(path))
	}
	switch t.Kind() {
	case reflect.Pointer:
		return check(raw, t.Elem(), path)
	case reflect.Struct:
		return checkObject(raw, t, path)
	case reflect.Array, reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil // []byte is a base64 string
		}
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			return nil // not an array: encoding/json says what is wrong
		}
		if t.Kind() == reflect.Array && len(elems) != t.Len() {
			return fmt.Errorf("%s: %d elements, want %d", where(path), len(elems), t.Len())
		}
		for i, e := range elems {
			if err := check(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkObject checks a JSON object for struct type t: each key once,
// spelt as one of t's fields, and each value.
func checkObject(raw json.RawMessage, t reflect.Type, path string) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil // not an object: encoding/json says what is wrong
	}
	fields := jsonFields(t)
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key := tok.(string)
		f, ok := fields[key]
		switch {
		case !ok:
			return fmt.Errorf("%s: unknown field %q", where(path), key)
		case seen[key]:
			return fmt.Errorf("%s: field %q given twice", where(path), key)
		}
		seen[key] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
		if err := check(v, f.Type, strings.TrimPrefix(path+"."+key, ".")); err != nil {
			return err
		}
	}
	return nil
}

// jsonFields maps the JSON keys of struct type t to its fields, as
// encoding/json names them (embedded structs are not used here).
func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := make(map[string]reflect.StructField, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		out[name] = f
	}
	return out
}

func where(path string) string {
	if path == "" {
		return "the object"
	}
	return path
}
