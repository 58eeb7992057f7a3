package client_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/seqkeeper/seqkeeper/client"
)

func Example() {
	c, err := client.New(client.Options{Endpoints: []string{"http://10.0.0.1:8080", "http://10.0.0.2:8080"}, Token: "token"})
	if err != nil {
		panic(err)
	}
	a, err := client.NewAllocator(c, "orders", client.AllocatorOptions{})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	defer a.Close(ctx) // pushes the unused IDs back
	id, err := a.Next(ctx)
	switch {
	case errors.Is(err, client.ErrUnknownSequence):
		fmt.Println("create it first: seqkeeper create orders")
	case errors.Is(err, client.ErrUnavailable):
		fmt.Println("no replica answered; retry later")
	case err == nil:
		fmt.Println("order", id)
	}
}
