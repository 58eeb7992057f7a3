package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// tokenSet is the bearer tokens a server accepts, as SHA-256 sums (so
// that comparing them takes the same time whatever the token's length).
type tokenSet struct {
	taker, admin [][sha256.Size]byte
}

func newTokenSet(taker, admin []string) (*tokenSet, error) {
	set := &tokenSet{}
	for _, t := range append(slices.Clone(taker), admin...) {
		if t == "" || strings.ContainsFunc(t, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return nil, errors.New("httpapi: a token must not be empty or contain white space or control characters")
		}
	}
	for _, a := range admin {
		if slices.Contains(taker, a) {
			return nil, errors.New("httpapi: the admin token must differ from the token that takes IDs")
		}
		set.admin = append(set.admin, sha256.Sum256([]byte(a)))
	}
	for _, t := range taker {
		set.taker = append(set.taker, sha256.Sum256([]byte(t)))
	}
	return set, nil
}

// match reports whether sum is one of sums, comparing every one in
// constant time.
func match(sums [][sha256.Size]byte, sum [sha256.Size]byte) bool {
	ok := 0
	for _, s := range sums {
		ok |= subtle.ConstantTimeCompare(sum[:], s[:])
	}
	return ok == 1
}

// SetTokens replaces the accepted tokens while the server runs, for a
// token file that changed: the requests that follow are checked against
// the new ones. A server started without tokens of a kind stays open for
// that kind (a token cannot be required later), and one started with them
// cannot be left with none: either is an error, and the old tokens stay.
func (s *Server) SetTokens(taker, admin []string) error {
	if (len(taker) > 0) != s.hasToken || (len(admin) > 0) != s.hasAdminToken {
		return errors.New("httpapi: the tokens can be replaced, not added or removed, while the server runs: restart it to turn a token on or off")
	}
	set, err := newTokenSet(taker, admin)
	if err != nil {
		return err
	}
	for _, ns := range s.rootServers {
		if err := ns.Server.SetTokens(taker, admin); err != nil {
			return fmt.Errorf("root %s: %w", ns.Name, err)
		}
	}
	s.tokens.Store(set)
	return nil
}
