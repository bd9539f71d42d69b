package node_test

import (
	"os"
	"testing"

	"github.com/paygate/gateway/node/nodetest"
)

func TestMain(m *testing.M) { os.Exit(nodetest.Run(m)) }
