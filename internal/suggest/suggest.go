// Package suggest finds the words a mistyped one was probably meant to be:
// the "did you mean" of unknown sequences, flags and configuration keys.
package suggest

import (
	"slices"
	"strings"
)

// Closest returns the candidates within a small edit distance of word
// (insertions, deletions, substitutions and swaps of two neighbours; at
// most 1 for words of up to 4 bytes, else 2, case ignored), nearest first
// then in their order, at most three, each once. word itself is not
// suggested.
func Closest(word string, candidates []string) []string {
	w := strings.ToLower(word)
	limit := 2
	if len(w) <= 4 {
		limit = 1
	}
	type hit struct {
		s string
		d int
	}
	var hits []hit
	for _, c := range candidates {
		if c == word || slices.ContainsFunc(hits, func(h hit) bool { return h.s == c }) {
			continue // a flag both global and a command's is one word
		}
		if d := distance(w, strings.ToLower(c)); d <= limit {
			hits = append(hits, hit{c, d})
		}
	}
	slices.SortStableFunc(hits, func(a, b hit) int { return a.d - b.d })
	out := make([]string, 0, min(3, len(hits)))
	for _, h := range hits[:min(3, len(hits))] {
		out = append(out, h.s)
	}
	return out
}

// distance is the optimal string alignment distance of a and b.
func distance(a, b string) int {
	if len(a) > 64 || len(b) > 64 || len(a)-len(b) > 3 || len(b)-len(a) > 3 {
		return 99 // far apart, or too long to be worth it
	}
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// Phrase returns ": did you mean a or b?" for the suggestions, quoted by
// quote, or "" when there are none.
func Phrase(suggestions []string, quote func(string) string) string {
	if len(suggestions) == 0 {
		return ""
	}
	q := make([]string, len(suggestions))
	for i, s := range suggestions {
		q[i] = quote(s)
	}
	return ": did you mean " + strings.Join(q, " or ") + "?"
}
