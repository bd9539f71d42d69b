// Package command is the replicated log's format, in one place: the
// commands (Cmd and what each kind carries), their binary codec, the entry
// framing that packs several commands into one Raft entry, and the decoder
// of the JSON entries written before it. It also holds the binary records
// those commands leave in the store (orders and token grants), which share
// the codec's parts and travel in snapshots; package wire has the
// primitives every binary record is written with.
//
// It says how commands and records are written, never what they do: the
// domain (package order) knows nothing of it, persistence applies the
// decoded commands, and cluster frames and replicates them. The known-answer
// fixtures in testdata hold bytes written by earlier binaries, which every
// later one must decode the same way.
//
//	order  <-  command  <-  persistence  <-  cluster
package command
