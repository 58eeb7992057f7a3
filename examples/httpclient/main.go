// Command httpclient takes IDs from seqkeeper replicas over HTTP with the
// Go client (package client), which links no ZooKeeper:
//
//	go run ./examples/httpclient -endpoints http://127.0.0.1:8080,http://127.0.0.1:8081 -sequence orders -n 5
//
// With the demo stack of the README running, the endpoints are the
// replicas' published ports; give -token when they require one.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/seqkeeper/seqkeeper/client"
)

func main() {
	endpoints := flag.String("endpoints", "http://127.0.0.1:8080", "comma-separated base URLs of the replicas")
	token := flag.String("token", os.Getenv("SEQKEEPER_HTTP_TOKEN"), "bearer token (default $SEQKEEPER_HTTP_TOKEN)")
	name := flag.String("sequence", "orders", "sequence to take IDs from")
	n := flag.Int("n", 5, "how many IDs to print")
	flag.Parse()

	c, err := client.New(client.Options{Endpoints: strings.Split(*endpoints, ","), Token: *token})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	a, err := client.NewAllocator(c, *name, client.AllocatorOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	defer func() {
		// Unused IDs go back to the sequence, so none is wasted.
		if err := a.Close(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	for range *n {
		id, err := a.Next(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return
		}
		fmt.Println(id)
	}
}
