package exposition

import (
	"bytes"
	"strings"
	"testing"
)

// The rewrite fills HELP text from the table, corrects a TYPE the table
// overrides, leaves out a dropped family with its samples, and keeps a
// family the table lacks with its bare HELP line, for the lint and the
// tests to report.
func TestAnnotate(t *testing.T) {
	in := strings.Join([]string{
		"# HELP gateway_raft_leader",
		"# TYPE gateway_raft_leader gauge",
		"gateway_raft_leader 1",
		"# HELP go_cgo_calls_count",
		"# TYPE go_cgo_calls_count counter",
		"go_cgo_calls_count 7",
		"# HELP process_io_read_bytes_total",
		"# TYPE process_io_read_bytes_total gauge",
		"process_io_read_bytes_total 42",
		"# HELP gateway_not_in_the_table",
		"# TYPE gateway_not_in_the_table counter",
		`gateway_not_in_the_table{a="b"} 3`,
	}, "\n") + "\n"
	var out bytes.Buffer
	annotate(&out, []byte(in))
	want := strings.Join([]string{
		"# HELP gateway_raft_leader " + families["gateway_raft_leader"].Help,
		"# TYPE gateway_raft_leader gauge",
		"gateway_raft_leader 1",
		"# HELP process_io_read_bytes_total " + families["process_io_read_bytes_total"].Help,
		"# TYPE process_io_read_bytes_total counter",
		"process_io_read_bytes_total 42",
		"# HELP gateway_not_in_the_table",
		"# TYPE gateway_not_in_the_table counter",
		`gateway_not_in_the_table{a="b"} 3`,
	}, "\n") + "\n"
	if out.String() != want {
		t.Errorf("annotate:\n%s\nwant:\n%s", out.String(), want)
	}
}

// Every row either describes its family or drops it, and HELP text is one
// line: the text format ends a HELP at the line's end.
func TestTableRows(t *testing.T) {
	for name, f := range families {
		if f.Drop != (f.Help == "") {
			t.Errorf("%s: a row has help text or drops its family, not both or neither", name)
		}
		if strings.ContainsAny(f.Help, "\n\r") {
			t.Errorf("%s: help text spans lines", name)
		}
		if f.Type != "" && f.Type != "counter" && f.Type != "gauge" {
			t.Errorf("%s: type %q", name, f.Type)
		}
	}
	if escapeHelp(`a\b`+"\n") != `a\\b\n` {
		t.Errorf("escapeHelp: %q", escapeHelp(`a\b`+"\n"))
	}
}

// Write answers in the text format with the library's families described
// (the full check against a running node is node's TestMetricsLint).
func TestWriteDescribesRuntimeMetrics(t *testing.T) {
	var out bytes.Buffer
	if err := Write(&out); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if name, ok := strings.CutPrefix(line, "# HELP "); ok && !strings.Contains(name, " ") {
			t.Errorf("no help text: %s", line)
		}
	}
	if !strings.Contains(out.String(), "\n# HELP go_goroutines ") {
		t.Errorf("go_goroutines missing:\n%s", out.String())
	}
	for _, name := range Dropped() {
		if strings.Contains(out.String(), "\n"+name) {
			t.Errorf("dropped family %s is written", name)
		}
	}
}
