// Package exposition writes a node's /metrics: every series of the
// process-wide VictoriaMetrics registry in the Prometheus text format, each
// family with its # TYPE and with # HELP text read from one table (help.go).
//
// The library writes "# HELP name" with no text and offers no way to give
// any; Prometheus' own lint (promtool check metrics) then reports "no help
// text" for every family, and an operator browsing a dashboard has no
// description to read. So the library's output is rewritten line by line:
// a HELP line gains its text from the table, a TYPE the library gets wrong
// is corrected, and a family the table drops is left out. The table is keyed
// by the family name alone, so a package that moves or renames a metric
// edits one row, and the tests (node/metrics_doc_test.go) fail for a family
// /metrics exposes that the table does not describe.
package exposition

import (
	"bytes"
	"io"
	"sync"

	"github.com/VictoriaMetrics/metrics"
)

// Without # HELP and # TYPE lines Prometheus takes every series as untyped,
// so a counter cannot be told from a gauge. A process-wide switch of the
// library, set by the package that writes /metrics.
func init() { metrics.ExposeMetadata(true) }

var buffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// Write writes every registered metric, the Go runtime and process
// metrics and the process's file descriptors to w, with the help text of
// the table.
func Write(w io.Writer) error {
	buf := buffers.Get().(*bytes.Buffer)
	defer buffers.Put(buf)
	buf.Reset()
	metrics.WritePrometheus(buf, true)
	metrics.WriteFDMetrics(buf) // descriptors held and allowed: a leak shows before accept fails
	out := buffers.Get().(*bytes.Buffer)
	defer buffers.Put(out)
	out.Reset()
	annotate(out, buf.Bytes())
	_, err := w.Write(out.Bytes())
	return err
}

var (
	helpPrefix = []byte("# HELP ")
	typePrefix = []byte("# TYPE ")
)

// annotate copies the library's exposition in to out, filling each family's
// HELP text from the table. The library writes a family's HELP and TYPE
// just before its samples, so every line up to the next HELP belongs to the
// family that HELP names: that is how a dropped family's samples go too.
// A family missing from the table keeps its bare HELP line, which promtool
// and the tests report.
func annotate(out *bytes.Buffer, in []byte) {
	dropping := false
	for len(in) > 0 {
		line := in
		if i := bytes.IndexByte(in, '\n'); i >= 0 {
			line, in = in[:i], in[i+1:]
		} else {
			in = nil
		}
		switch {
		case bytes.HasPrefix(line, helpPrefix):
			name := string(bytes.TrimSpace(line[len(helpPrefix):]))
			f, known := families[name]
			dropping = known && f.Drop
			if dropping {
				continue
			}
			out.Write(helpPrefix)
			out.WriteString(name)
			if known {
				out.WriteByte(' ')
				out.WriteString(escapeHelp(f.Help))
			}
		case dropping:
			continue
		case bytes.HasPrefix(line, typePrefix):
			name, typ, _ := bytes.Cut(line[len(typePrefix):], []byte(" "))
			if f := families[string(name)]; f.Type != "" {
				typ = []byte(f.Type)
			}
			out.Write(typePrefix)
			out.Write(name)
			out.WriteByte(' ')
			out.Write(typ)
		default:
			out.Write(line)
		}
		out.WriteByte('\n')
	}
}

// escapeHelp escapes what the text format requires in HELP text.
func escapeHelp(s string) string {
	if !bytes.ContainsAny([]byte(s), "\\\n") {
		return s
	}
	var b bytes.Buffer
	for _, r := range s {
		switch r {
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Described reports whether the table describes family name (and does not
// drop it): the tests hold every family /metrics shows to it.
func Described(name string) bool {
	f, ok := families[name]
	return ok && !f.Drop && f.Help != ""
}

// Dropped lists the families the table leaves out of /metrics.
func Dropped() []string {
	var out []string
	for name, f := range families {
		if f.Drop {
			out = append(out, name)
		}
	}
	return out
}
