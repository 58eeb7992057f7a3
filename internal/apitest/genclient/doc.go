// Package genclient is a client of the HTTP API generated from
// httpapi/openapi.json by an off-the-shelf generator, oapi-codegen
// (github.com/oapi-codegen/oapi-codegen, v2.8.2), with no edits. It proves
// that clients in other languages can be generated from the document:
// httpapi's TestGeneratedClient drives a real replica with it, and
// TestGeneratedClientIsCurrent regenerates it and fails when the
// committed code differs. Regenerate after changing the document:
//
//	go generate ./internal/apitest/genclient
//
// It is for tests; Go services use package client.
package genclient

//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2 -config oapi-codegen.yaml ../../../httpapi/openapi.json
