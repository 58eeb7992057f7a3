// Command httpclient takes IDs from seqkeeper replicas over HTTP with the
// Go client (package client), which links no ZooKeeper:
//
//	go run ./examples/httpclient -endpoints http://127.0.0.1:7071,http://127.0.0.1:7072,http://127.0.0.1:7073 -sequence orders -n 5
//
// 7070 is a replica's port (serve's default http); the demo stack of the
// README publishes its three replicas on 7071-7073. Give -token when they
// require one. It exits 1 when the IDs cannot be taken (an unknown
// sequence, a wrong token, no replica), 2 for bad flags.
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
	endpoints := flag.String("endpoints", "http://127.0.0.1:7070", "comma-separated base URLs of the replicas")
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
	code := 0
	for range *n {
		id, err := a.Next(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
			break
		}
		fmt.Println(id)
	}
	// Unused IDs go back to the sequence, so none is wasted.
	if err := a.Close(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}
