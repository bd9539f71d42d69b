// Package docs carries the documents the node serves itself: the OpenAPI
// document of the merchant API (openapi.yaml, at GET /api/v3/openapi.yaml).
// The rest of this folder is prose for people.
package docs

import _ "embed"

// OpenAPI is docs/openapi.yaml, the merchant API's OpenAPI 3.1 document.
//
//go:embed openapi.yaml
var OpenAPI []byte
