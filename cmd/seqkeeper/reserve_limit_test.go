package main

import (
	"context"
	"strings"
	"testing"

	"github.com/seqkeeper/seqkeeper/internal/testenv"
)

// A reserve above the cap is a configuration error: exit 2 before anything
// is dialled, naming the allowed range, from a flag or the environment.
func TestReserveAboveLimitIsAUsageError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"flag", nil, []string{"serve", "--max-reserve", "1125899906842625"},
			"max_reserve: 1125899906842625 must be at least min_reserve (1000) and at most 1125899906842624 (2^50)"},
		{"env", map[string]string{"SEQKEEPER_MIN_RESERVE": "9223372036854775807"}, []string{"list"},
			"min_reserve: 9223372036854775807 must be at least 1 and at most 1125899906842624 (2^50)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"SEQKEEPER_ZK": "127.0.0.1:1", "SEQKEEPER_STORE": "file:///tmp/unused"}
			for k, v := range tc.env {
				env[k] = v
			}
			var stderr testenv.Buffer
			g := &globals{
				stdin: strings.NewReader(""), stdout: &testenv.Buffer{}, stderr: &stderr,
				lookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
			}
			if code := run(context.Background(), g, tc.args); code != 2 || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("seqkeeper %s: exit %d, stderr %q; want exit 2 with %q", strings.Join(tc.args, " "), code, stderr.String(), tc.want)
			}
		})
	}
}
