package netaddr

import "testing"

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:80": true, "127.8.9.10:1": true, "[::1]:443": true, "localhost:6060": true, "LocalHost:1": true,
		"[::ffff:127.0.0.1]:80": true, // IPv4-mapped loopback
		":8080":                 false, "0.0.0.0:80": false, "[::]:80": false, "10.0.0.1:80": false,
		"localhost.example.com:80": false, "127.0.0.1": false, "": false, "[fe80::1%lo]:80": false,
	} {
		if got := Loopback(addr); got != want {
			t.Errorf("Loopback(%q) = %v, want %v", addr, got, want)
		}
	}
	if !LoopbackHost("::1") || LoopbackHost("") || LoopbackHost("example.com") {
		t.Error("LoopbackHost misjudges a bare host")
	}
}
