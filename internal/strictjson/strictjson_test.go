package strictjson

import (
	"reflect"
	"strings"
	"testing"
)

type inner struct {
	N int64 `json:"n"`
}

type sample struct {
	Name   string     `json:"name"`
	Count  int64      `json:"count,omitempty"`
	On     bool       `json:"on"`
	Pairs  [][2]int64 `json:"pairs"`
	Inner  *inner     `json:"inner"`
	List   []inner    `json:"list"`
	Plain  string
	Hidden string `json:"-"`
}

func TestDecode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want sample
		err  string // a part of the error; "" for none
	}{
		{in: `{"name":"a","count":3,"on":true,"pairs":[[1,2]],"inner":{"n":5},"list":[{"n":1}],"Plain":"p"}`,
			want: sample{Name: "a", Count: 3, On: true, Pairs: [][2]int64{{1, 2}}, Inner: &inner{N: 5}, List: []inner{{N: 1}}, Plain: "p"}},
		{in: " {} \n", want: sample{}},
		{in: `{"name":"\u0061","count":-0,"pairs":null,"inner":null,"list":null}`, want: sample{Name: "a"}},
		{in: `{"name":"a"}]`, err: "more after the JSON object"},
		{in: `{"name":"a"}}`, err: "more after the JSON object"},
		{in: `{"name":"a"}{}`, err: "more after the JSON object"},
		{in: `{"name":"a","name":"b"}`, err: `field "name" given twice`},
		{in: `{"NAME":"a"}`, err: `unknown field "NAME"`},
		{in: `{"plain":"a"}`, err: `unknown field "plain"`},
		{in: `{"Hidden":"a"}`, err: `unknown field "Hidden"`},
		{in: `{"other":1}`, err: `unknown field "other"`},
		{in: `{"count":null}`, err: "count: null"},
		{in: `{"name":null}`, err: "name: null"},
		{in: `{"pairs":[[1,2,3]]}`, err: "pairs[0]: 3 elements, want 2"},
		{in: `{"pairs":[[1]]}`, err: "pairs[0]: 1 elements, want 2"},
		{in: `{"pairs":[[1,null]]}`, err: "pairs[0][1]: null"},
		{in: `{"inner":{"n":1,"n":2}}`, err: `inner: field "n" given twice`},
		{in: `{"list":[{"N":1}]}`, err: `list[0]: unknown field "N"`},
		{in: `null`, err: "the object: null"},
		{in: `[]`, err: "cannot unmarshal array"},
		{in: `{"count":1.5}`, err: "cannot unmarshal number 1.5"},
		{in: ``, err: "EOF"},
	} {
		var got sample
		err := Decode([]byte(tc.in), &got)
		switch {
		case tc.err == "" && (err != nil || !reflect.DeepEqual(got, tc.want)):
			t.Errorf("Decode(%s) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("Decode(%s) = %v, want an error with %q", tc.in, err, tc.err)
		}
	}
	if err := Decode([]byte(`{}`), new(int)); err == nil {
		t.Error("Decode into *int: no error")
	}
}
