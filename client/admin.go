package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
)

// CreateOptions are the settings of a sequence Create registers. The zero
// value is the default: IDs from 1 to 2^63-1, no windows.
type CreateOptions struct {
	// Start is the first ID (default 1) and Max the last (default
	// 2^63-1).
	Start, Max int64
	// Windows is how many lock-free windows takers may open (default 0).
	Windows int
}

// Created is what Create found or made.
type Created struct {
	// Sequence is the name; Start, End and Windows its settings, defaults
	// filled in.
	Sequence string `json:"sequence"`
	Start    int64  `json:"start"`
	End      int64  `json:"end"`
	Windows  int    `json:"windows"`
	// Created is false when the sequence existed with these settings.
	Created bool `json:"created"`
}

// Create registers sequence name (POST /v1/sequences): the primary
// initialises it, and takes may wait a moment for that. It needs the
// replicas' admin token (http_admin_token) as Options.Token. Creating a
// sequence that exists with the same settings is not an error (Created
// false), so a lost answer is retried; one that exists with other settings
// fails with ErrExists. A name deleted before starts above every ID its
// earlier incarnations handed out.
func (c *Client) Create(ctx context.Context, name string, opts CreateOptions) (Created, error) {
	body, err := json.Marshal(struct {
		Name    string `json:"name"`
		Start   int64  `json:"start,omitempty"`
		Max     int64  `json:"max,omitempty"`
		Windows int    `json:"windows,omitempty"`
	}{name, opts.Start, opts.Max, opts.Windows})
	if err != nil {
		return Created{}, err
	}
	var out Created
	_, err = c.do(ctx, nil, http.MethodPost, "/v1/sequences", body, nil, true, &out)
	return out, err
}

// Delete deletes sequence name for good (DELETE /v1/sequences/{name}) and
// returns the tombstone's ceiling: the highest ID the sequence may have
// handed out. The replica removes the sequence from ZooKeeper in the
// transaction that records its deletion there, then writes the tombstone
// to the durable store, so a restore never brings it back and a sequence
// created later under the name starts above the ceiling. It needs
// the admin token. IDs taken from the sequence and not used are lost;
// clients still taking from it get ErrUnknownSequence once it is gone.
//
// A delete whose answer was lost is sent again: if the sequence is gone by
// then, it fails with ErrUnknownSequence (the first attempt, or someone
// else, deleted it).
func (c *Client) Delete(ctx context.Context, name string) (tombstoneCeiling int64, err error) {
	var out struct {
		TombstoneCeiling int64 `json:"tombstone_ceiling"`
	}
	_, err = c.do(ctx, nil, http.MethodDelete, "/v1/sequences/"+url.PathEscape(name), nil, nil, true, &out)
	if err != nil {
		return 0, err
	}
	c.served.forget(name)
	return out.TombstoneCeiling, nil
}
