// Package apiclient is a client of payout's HTTP API generated from
// docs/openapi.yaml by oapi-codegen (apiclient.gen.go: do not edit; run
// go generate ./apiclient after changing the spec). The end-to-end test
// drives the API through it, so that a spec at odds with the server
// fails there.
package apiclient

//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.5.1 -generate types,client -package apiclient -o apiclient.gen.go ../../docs/openapi.yaml
