// Package apiuser is a Go module outside seqkeeper that uses a client
// generated from httpapi/openapi.json by oapi-codegen, unedited: the way a
// user of the HTTP API generates one in their own language. httpapi's
// TestGeneratedClient copies this directory into a temporary one,
// generates the client there (package genclient, with the generator this
// go.mod pins as a tool) and runs this test against a real replica.
package apiuser

import (
	"context"
	"net/http"
	"os"
	"testing"

	"example.com/apiuser/genclient"
)

// The replica's URL and its tokens, from httpapi's TestGeneratedClient.
const (
	urlVar   = "SEQKEEPER_URL"
	tokenVar = "SEQKEEPER_TOKEN"
	adminVar = "SEQKEEPER_ADMIN_TOKEN"
)

// The generated client creates a sequence, takes and recycles IDs, lists
// and describes, reads the status, gets the documented errors, and
// deletes.
func TestGeneratedClient(t *testing.T) {
	url := os.Getenv(urlVar)
	if url == "" {
		t.Fatalf("%s is not set: run httpapi's TestGeneratedClient, which sets it", urlVar)
	}
	ctx := context.Background()
	bearer := func(token string) genclient.ClientOption {
		return genclient.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+token)
			return nil
		})
	}
	adm, err := genclient.NewClientWithResponses(url, bearer(os.Getenv(adminVar)))
	if err != nil {
		t.Fatal(err)
	}
	c, err := genclient.NewClientWithResponses(url, bearer(os.Getenv(tokenVar)))
	if err != nil {
		t.Fatal(err)
	}

	start, windows := int64(500), 0
	created, err := adm.CreateSequenceWithResponse(ctx, genclient.CreateRequest{Name: "gen", Start: &start, Windows: &windows})
	if err != nil || created.JSON201 == nil || !created.JSON201.Created || created.JSON201.Start != 500 {
		t.Fatalf("create: %v %d %s", err, created.StatusCode(), created.Body)
	}
	if refused, err := c.CreateSequenceWithResponse(ctx, genclient.CreateRequest{Name: "gen2"}); err != nil || refused.JSON403 == nil || refused.JSON403.Error.Code != genclient.ErrorErrorCodeForbidden {
		t.Fatalf("create with the taker's token: %v %s", err, refused.Body)
	}

	count := 20
	took, err := c.TakeIDsWithResponse(ctx, "gen", &genclient.TakeIDsParams{Count: &count})
	if err != nil || took.JSON200 == nil || took.JSON200.Ranges[0][0] != 500 {
		t.Fatalf("take: %v %d %s", err, took.StatusCode(), took.Body)
	}
	key := "gen-recycle-1"
	back, err := c.RecycleIDsWithResponse(ctx, "gen", &genclient.RecycleIDsParams{IdempotencyKey: &key},
		genclient.RecycleRequest{Ranges: [][]int64{{500, 504}}})
	if err != nil || back.JSON200 == nil || back.JSON200.Recycled != 5 || back.JSON200.AlreadyApplied {
		t.Fatalf("recycle: %v %d %s", err, back.StatusCode(), back.Body)
	}
	again, err := c.RecycleIDsWithResponse(ctx, "gen", &genclient.RecycleIDsParams{IdempotencyKey: &key},
		genclient.RecycleRequest{Ranges: [][]int64{{500, 504}}})
	if err != nil || again.JSON200 == nil || !again.JSON200.AlreadyApplied {
		t.Fatalf("recycle retried with its key: %v %d %s", err, again.StatusCode(), again.Body)
	}
	bad, err := c.RecycleIDsWithResponse(ctx, "gen", nil, genclient.RecycleRequest{Ranges: [][]int64{{1 << 40, 1 << 40}}})
	if err != nil || bad.JSON409 == nil || bad.JSON409.Error.Code != genclient.ErrorErrorCodeNotHandedOut {
		t.Fatalf("recycle of IDs never issued: %v %d %s", err, bad.StatusCode(), bad.Body)
	}

	limit := 1
	page, err := c.ListSequencesWithResponse(ctx, &genclient.ListSequencesParams{Limit: &limit})
	if err != nil || page.JSON200 == nil || len(page.JSON200.Sequences) != 1 || page.JSON200.Sequences[0].Name != "gen" {
		t.Fatalf("list: %v %d %s", err, page.StatusCode(), page.Body)
	}
	d, err := c.DescribeSequenceWithResponse(ctx, "gen")
	if err != nil || d.JSON200 == nil || d.JSON200.Start != 500 || d.JSON200.RecycledIds != 5 {
		t.Fatalf("describe: %v %d %s", err, d.StatusCode(), d.Body)
	}
	missing, err := c.DescribeSequenceWithResponse(ctx, "nosuch")
	if err != nil || missing.JSON404 == nil || missing.JSON404.Error.Code != genclient.ErrorErrorCodeUnknownSequence {
		t.Fatalf("describe of a missing sequence: %v %d %s", err, missing.StatusCode(), missing.Body)
	}
	none := genclient.StatusParamsSequencesNone
	st, err := c.StatusWithResponse(ctx, &genclient.StatusParams{Sequences: &none})
	if err != nil || st.JSON200 == nil || len(st.JSON200.Allocators) != 1 {
		t.Fatalf("status: %v %d %s", err, st.StatusCode(), st.Body)
	}

	del, err := adm.DeleteSequenceWithResponse(ctx, "gen")
	if err != nil || del.JSON200 == nil || del.JSON200.TombstoneCeiling < 519 {
		t.Fatalf("delete: %v %d %s", err, del.StatusCode(), del.Body)
	}
}
