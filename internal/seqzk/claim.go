package seqzk

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/seqkeeper/seqkeeper/zkclient"
)

// ErrClaimed reports a znode that seqkeeper keeps for one sequences root
// (an election path, a cluster marker) and that belongs to another root:
// two roots sharing it would share one primary, or one marker. A
// configuration error; the message names the root that holds it.
var ErrClaimed = errors.New("belongs to another sequences root")

// claimHeader is the first line of a claimed znode's data; the second is
// "root <quoted path>".
const claimHeader = "seqkeeper-claim v1"

// Claim makes the znode at path (created with its parents when missing)
// record that it belongs to this client's root, or fails with ErrClaimed,
// naming the root that holds it. A znode with no data (created before
// claims existed) is claimed; data that is not a claim is refused as not
// seqkeeper's. what names the znode for messages ("election_path").
func (o Operator) Claim(ctx context.Context, path, what string) error {
	c := o.c
	kind := KindMarker
	if what == "election_path" {
		kind = KindElection
	}
	if err := c.ensure(ctx, kind, path); err != nil {
		return fmt.Errorf("%s %s: %w", what, path, err)
	}
	want := []byte(claimHeader + "\nroot " + strconv.Quote(c.opts.Root) + "\n")
	for attempt := 0; ; attempt++ {
		data, stat, err := c.zk.Session().Get(ctx, path)
		c.stats.requests.Add(1)
		if err != nil {
			return fmt.Errorf("%s %s: %w", what, path, err)
		}
		if len(data) > 0 {
			root, ok := parseClaim(data)
			switch {
			case !ok:
				return fmt.Errorf("%s %s holds data that is not seqkeeper's (%.40q): %w; give this root a path of its own", what, path, data, ErrClaimed)
			case root != c.opts.Root:
				return fmt.Errorf("%s %s %w %q (this seqkeeper serves %q): give every root its own %s", what, path, ErrClaimed, root, c.opts.Root, what)
			}
			return nil
		}
		_, err = c.write(ctx, zkclient.SetOp(path, want, stat.Version))
		switch {
		case err == nil:
			return nil
		case errors.Is(err, zkclient.ErrBadVersion) && attempt < 5:
			continue // someone wrote it first: read theirs
		default:
			return fmt.Errorf("claim %s %s for %s: %w", what, path, c.opts.Root, err)
		}
	}
}

// parseClaim returns the root a claimed znode's data names.
func parseClaim(data []byte) (root string, ok bool) {
	rest, ok := strings.CutPrefix(string(data), claimHeader+"\nroot ")
	q, ok2 := strings.CutSuffix(rest, "\n")
	root, err := strconv.Unquote(q)
	return root, ok && ok2 && err == nil
}

// ClaimOf reads the claim of the znode at path without changing it:
// exists is false when there is no znode; root is the root its claim
// names, empty for a znode without data (made before claims existed) and
// for data that is not a claim (then foreign is true).
func (o Operator) ClaimOf(ctx context.Context, path string) (root string, exists, foreign bool, err error) {
	c := o.c
	data, _, err := c.zk.Session().Get(ctx, path)
	c.stats.requests.Add(1)
	switch {
	case errors.Is(err, zkclient.ErrNoNode):
		return "", false, false, nil
	case err != nil:
		return "", false, false, fmt.Errorf("read %s: %w", path, err)
	case len(data) == 0:
		return "", true, false, nil
	}
	root, ok := parseClaim(data)
	return root, true, !ok, nil
}
