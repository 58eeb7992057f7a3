// Package fuzztest is what seqkeeper's fuzz tests share: their seed
// corpora (Corpus) and the oracles of formats that more than one package
// reads (JSON).
//
// A fuzz test keeps its seeds in the tree, in the file format go test
// -fuzz reads (testdata/fuzz/<FuzzName>/<file>, "go test fuzz v1"). It
// builds them with the real encoders; Corpus adds them to the fuzz test
// and, when SEQKEEPER_WRITE_FUZZ_SEEDS=1, writes them to testdata as well,
// so that objects of today's formats stay in the corpus after the encoders
// change. Inputs the fuzzer found go next to them, under the names go test
// gave them, as regression seeds.
//
//	SEQKEEPER_WRITE_FUZZ_SEEDS=1 go test -run '^FuzzX$' ./pkg/
package fuzztest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// Env is the environment variable that makes Corpus write the seeds.
const Env = "SEQKEEPER_WRITE_FUZZ_SEEDS"

// Seed is one named input of a fuzz test: the values of the arguments of
// its fuzz function after *testing.T, in order.
type Seed struct {
	Name string
	Args []any
}

// New returns the seed name with values args.
func New(name string, args ...any) Seed { return Seed{Name: name, Args: args} }

// seedName is what a seed's file may be called (its name, prefixed with
// "seed-"; go test's own finds are hex digests).
var seedName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// Corpus adds every seed to f and, when Env is 1, writes each to
// testdata/fuzz/<f's name>/seed-<name>, replacing the file of that name.
func Corpus(f *testing.F, seeds ...Seed) {
	f.Helper()
	write := os.Getenv(Env) == "1"
	dir := filepath.Join("testdata", "fuzz", f.Name())
	seen := map[string]bool{}
	for _, s := range seeds {
		if !seedName.MatchString(s.Name) || seen[s.Name] {
			f.Fatalf("seed name %q: want a unique lower-case word with dashes", s.Name)
		}
		seen[s.Name] = true
		f.Add(s.Args...)
		if !write {
			continue
		}
		data, err := Marshal(s.Args...)
		if err != nil {
			f.Fatalf("seed %s: %v", s.Name, err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			f.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "seed-"+s.Name), data, 0o644); err != nil {
			f.Fatal(err)
		}
	}
}

// Add adds one seed to f, as f.Add does, and when Env is 1 writes it to
// testdata/fuzz/<f's name>/seed-<digest of its file>: for seeds without a
// name of their own.
func Add(f *testing.F, args ...any) {
	f.Helper()
	data, err := Marshal(args...)
	if err != nil {
		f.Fatal(err)
	}
	sum := sha256.Sum256(data)
	Corpus(f, New(hex.EncodeToString(sum[:8]), args...))
}

// Marshal encodes values as a corpus file, as go test writes one.
func Marshal(values ...any) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("go test fuzz v1\n")
	for _, v := range values {
		switch v := v.(type) {
		case []byte:
			fmt.Fprintf(&b, "[]byte(%q)\n", v)
		case string:
			fmt.Fprintf(&b, "string(%q)\n", v)
		case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, bool:
			fmt.Fprintf(&b, "%T(%v)\n", v, v)
		default:
			return nil, fmt.Errorf("a value of type %T cannot be a fuzz argument here", v)
		}
	}
	return b.Bytes(), nil
}
