package node_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/paygate/gateway/node/nodetest"
)

// openAPI holds every merchant API answer the end-to-end tests of this
// package receive (nodetest.Merchant.Post) to docs/openapi.yaml: a field,
// status or error code the document does not describe fails the test that
// saw it.
var openAPI *nodetest.OpenAPI

func TestMain(m *testing.M) {
	var err error
	if openAPI, err = nodetest.LoadOpenAPI(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	nodetest.AnswerCheck = openAPI.CheckAnswer
	os.Exit(nodetest.Run(m))
}
