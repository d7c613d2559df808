package api

import (
	"context"
	_ "embed" // the OpenAPI document
	"fmt"
	"net/http"

	"github.com/getkin/kin-openapi/openapi3"
)

// Spec is the OpenAPI 3.1 document of the API, as written
// (docs/openapi.yaml links to this file).
//
//go:embed openapi.yaml
var Spec []byte

// SpecJSON is Spec as JSON, after kin-openapi loaded and validated it.
func SpecJSON() ([]byte, error) {
	doc, err := LoadSpec()
	if err != nil {
		return nil, err
	}
	return doc.MarshalJSON()
}

// LoadSpec loads and validates Spec.
func LoadSpec() (*openapi3.T, error) {
	doc, err := openapi3.NewLoader().LoadFromData(Spec)
	if err != nil {
		return nil, fmt.Errorf("api: openapi.yaml: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("api: openapi.yaml: %w", err)
	}
	return doc, nil
}

// openAPI: GET /api/v1/openapi.json, without a token.
func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(s.spec)
}
