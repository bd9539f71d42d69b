package node

import "testing"

func TestJoinAddressAcceptsHostPortOrHTTPURL(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"127.0.0.1:8081", "127.0.0.1:8081", true},
		{"http://127.0.0.1:8081", "127.0.0.1:8081", true},
		{"http://127.0.0.1:8081/", "127.0.0.1:8081", true},
		{"gw-1.internal:8081", "gw-1.internal:8081", true},
		{"http://[::1]:8081", "[::1]:8081", true},
		{"127.0.0.1", "", false},                              // no port
		{"https://127.0.0.1:8081", "", false},                 // members serve plain HTTP
		{"http://127.0.0.1:8081/admin/v1/cluster", "", false}, // a path would be dropped
		{"http//127.0.0.1:8081", "", false},
	} {
		got, err := joinAddress(tc.in)
		if tc.ok && (err != nil || got != tc.want) {
			t.Errorf("joinAddress(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
		if !tc.ok && err == nil {
			t.Errorf("joinAddress(%q) = %q; want an error", tc.in, got)
		}
	}
}

func TestValidateNormalisesJoin(t *testing.T) {
	c := Config{Join: "http://10.0.0.5:8081/", AdminToken: "t", Dev: true, SettleDelayUnit: 1, HTTPAddr: "127.0.0.1:0"}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Join != "10.0.0.5:8081" {
		t.Fatalf("Join = %q, want 10.0.0.5:8081", c.Join)
	}
}
