package apierr

import (
	"fmt"
	"strings"
)

// MarkdownTable renders the catalogue as the table docs/api.md carries; a
// test keeps the doc and this table identical.
func MarkdownTable() string {
	var b strings.Builder
	b.WriteString("| HTTP | code | when |\n|---|---|---|\n")
	for _, c := range Catalogue() {
		fmt.Fprintf(&b, "| %d | %s | %s |\n", c.HTTP, c.Code, c.Reason)
	}
	return b.String()
}
