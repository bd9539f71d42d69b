package webhook

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestForbiddenAddr(t *testing.T) {
	forbidden := []string{
		"0.0.0.0", "0.1.2.3", "10.0.0.1", "10.255.255.255", "100.64.0.1", "100.100.100.200", "100.127.255.255",
		"127.0.0.1", "127.255.255.254", "169.254.0.1", "169.254.169.254", "172.16.0.1", "172.31.255.255",
		"192.0.0.192", "192.0.2.1", "192.88.99.1", "192.168.0.1", "198.18.0.1", "198.51.100.1", "203.0.113.1",
		"224.0.0.1", "239.255.255.250", "240.0.0.1", "255.255.255.255",
		"::", "::1", "::127.0.0.1", "::7f00:1", "::ffff:127.0.0.1", "::ffff:7f00:1", "::ffff:10.0.0.1",
		"::ffff:169.254.169.254", "::ffff:0.0.0.0", "::8.8.8.8", // IPv4-compatible is deprecated: refused outright
		"64:ff9b::127.0.0.1", "64:ff9b::a9fe:a9fe", "64:ff9b:1::8.8.8.8",
		"2002:7f00:1::", "2002:a9fe:a9fe::1", "2002:c0a8:101::1",
		"fe80::1", "fe80::1%eth0", "febf::1", "fec0::1", "fc00::1", "fd00::1", "fd00:ec2::254",
		"ff02::1", "ff05::2", "2001::1", "2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001:db8::1", "3fff::1",
		"100::1", "2001:4860:4860::8888%eth0",
	}
	allowed := []string{
		"8.8.8.8", "1.1.1.1", "100.63.255.255", "100.128.0.0", "172.15.255.255", "172.32.0.0",
		"169.253.255.255", "169.255.0.0", "192.0.1.1", "192.167.255.255", "223.255.255.255",
		"::ffff:8.8.8.8", "64:ff9b::8.8.8.8", "2002:808:808::1",
		"2001:4860:4860::8888", "2606:4700:4700::1111", "2a00:1450:4001:80b::200e",
	}
	for _, s := range forbidden {
		if !forbiddenAddr(netip.MustParseAddr(s)) {
			t.Errorf("%s not forbidden", s)
		}
	}
	for _, s := range allowed {
		if forbiddenAddr(netip.MustParseAddr(s)) {
			t.Errorf("%s forbidden", s)
		}
	}
	if !forbiddenAddr(netip.Addr{}) {
		t.Error("the invalid Addr is not forbidden")
	}
}

func TestCheckURLStrict(t *testing.T) {
	g := &Guard{}
	ok := []string{
		"https://example.com/callback",
		"https://example.com",
		"http://shop.example.com:8080/hooks/paygate?x=1#frag",
		"https://EXAMPLE.com./x",
		"https://my_host.example.co.uk/x",
		"https://xn--bcher-kva.example/x",
		"http://8.8.8.8/hook",
		"http://8.8.8.8:65535/hook",
		"http://[2606:4700:4700::1111]/hook",
		"http://[::ffff:8.8.8.8]/hook",
		"https://127.0.0.1.nip.io/", // can only be caught at dial time, after DNS
	}
	for _, u := range ok {
		if err := g.CheckURL(u); err != nil {
			t.Errorf("CheckURL(%q) = %v", u, err)
		}
	}
	bad := []struct {
		url  string
		want error
	}{
		{"", ErrInvalidURL},
		{" https://example.com/", ErrInvalidURL},
		{"example.com/hook", ErrInvalidURL},
		{"/hook", ErrInvalidURL},
		{"http://exa mple.com/", ErrInvalidURL},
		{"http://[::1/", ErrInvalidURL},
		{"http:example.com", ErrInvalidURL},
		{"ftp://example.com/", ErrScheme},
		{"file:///etc/passwd", ErrScheme},
		{"javascript:alert(1)", ErrScheme},
		{"gopher://example.com/", ErrScheme},
		{"dict://example.com:11211/", ErrScheme},
		{"ws://example.com/", ErrScheme},
		{"http:///hook", ErrNoHost},
		{"http://:80/hook", ErrNoHost},
		{"http://user@example.com/", ErrUserinfo},
		{"http://user:pw@example.com/", ErrUserinfo},
		{"http://@example.com/", ErrUserinfo},
		{"http://example.com:0/", ErrPort},
		{"http://example.com:65536/", ErrPort},
		{"http://example.com:000080/", ErrPort},
		{"http://[127.0.0.1]/", ErrInvalidURL},
		{"http://[1.2.3.4]/", ErrInvalidURL},
		{"http://exa$mple.com/", ErrInvalidHost},
		{"http://ex..ample.com/", ErrInvalidHost},
		{"http://example.com../", ErrInvalidHost},
		{"http://bücher.example/", ErrInvalidHost},
		{"http://%E2%91%A0%E2%91%A1%E2%91%A6.0.0.1/", ErrInvalidHost},
		{"http://" + strings.Repeat("a", 64) + ".com/", ErrInvalidHost},
		{"http://2130706433/", ErrAmbiguousHost},
		{"http://0177.0.0.1/", ErrAmbiguousHost},
		{"http://0x7f.0.0.1/", ErrAmbiguousHost},
		{"http://0X7F.0.0.1/", ErrAmbiguousHost},
		{"http://127.1/", ErrAmbiguousHost},
		{"http://127.0.1/", ErrAmbiguousHost},
		{"http://8.8.8.010/", ErrAmbiguousHost},
		{"http://1.2.3.4.5/", ErrAmbiguousHost},
		{"http://example.0x1/", ErrAmbiguousHost},
		{"http://example.123/", ErrAmbiguousHost},
		{"http://0x/", ErrAmbiguousHost},
		{"http://127.0.0.1/", ErrPrivateAddress},
		{"http://127.0.0.1./", ErrPrivateAddress},
		{"http://10.1.2.3/", ErrPrivateAddress},
		{"http://172.20.0.1/", ErrPrivateAddress},
		{"http://192.168.0.10:8080/", ErrPrivateAddress},
		{"http://169.254.169.254/latest/meta-data/", ErrPrivateAddress},
		{"http://100.100.100.200/", ErrPrivateAddress},
		{"http://0.0.0.0/", ErrPrivateAddress},
		{"http://255.255.255.255/", ErrPrivateAddress},
		{"http://[::1]/", ErrPrivateAddress},
		{"http://[::]/", ErrPrivateAddress},
		{"http://[::ffff:127.0.0.1]/", ErrPrivateAddress},
		{"http://[::ffff:7f00:1]/", ErrPrivateAddress},
		{"http://[::127.0.0.1]/", ErrPrivateAddress},
		{"http://[64:ff9b::7f00:1]/", ErrPrivateAddress},
		{"http://[2002:a9fe:a9fe::]/", ErrPrivateAddress},
		{"http://[fe80::1%25eth0]/", ErrPrivateAddress},
		{"http://[2606:4700:4700::1111%25eth0]/", ErrPrivateAddress},
		{"http://[fd00:ec2::254]/", ErrPrivateAddress},
		{"http://[FD00:EC2::254]/", ErrPrivateAddress},
		{"http://localhost/", ErrInternalHost},
		{"http://LocalHost:8080/", ErrInternalHost},
		{"http://localhost./", ErrInternalHost},
		{"http://foo.localhost/", ErrInternalHost},
		{"http://a.b.LOCALHOST./", ErrInternalHost},
		{"http://metadata.google.internal/computeMetadata/v1/", ErrInternalHost},
		{"http://metadata/", ErrInternalHost},
		{"http://metadata.goog/", ErrInternalHost},
		{"http://instance-data/", ErrInternalHost},
		{"http://printer.local/", ErrInternalHost},
		{"http://router.home.arpa/", ErrInternalHost},
		{"http://1.0.0.127.in-addr.arpa/", ErrInternalHost},
		{"http://kubernetes.default.svc.cluster.local/", ErrInternalHost},
	}
	for _, tc := range bad {
		err := g.CheckURL(tc.url)
		if err != tc.want {
			t.Errorf("CheckURL(%q) = %v, want %v", tc.url, err, tc.want)
		}
	}
}

func TestCheckURLAllowPrivate(t *testing.T) {
	g := &Guard{AllowPrivate: true}
	for _, u := range []string{
		"http://127.0.0.1:8080/hook", "http://localhost:8080/hook", "http://[::1]:8080/",
		"http://10.0.0.1/", "http://169.254.169.254/", "http://[fe80::1%25lo]/", "http://receiver/",
		"https://example.com/hook",
	} {
		if err := g.CheckURL(u); err != nil {
			t.Errorf("AllowPrivate: CheckURL(%q) = %v", u, err)
		}
	}
	for u, want := range map[string]error{
		"ftp://127.0.0.1/":         ErrScheme,
		"http://user@127.0.0.1/":   ErrUserinfo,
		"http:///x":                ErrNoHost,
		"http://127.0.0.1:0/":      ErrPort,
		"http://2130706433/":       ErrAmbiguousHost,
		"http://127.1/":            ErrAmbiguousHost,
		"http://[127.0.0.1]/":      ErrInvalidURL,
		"not a url":                ErrInvalidURL,
		"http://exa mple.com:80/x": ErrInvalidURL,
	} {
		if err := g.CheckURL(u); err != want {
			t.Errorf("AllowPrivate: CheckURL(%q) = %v, want %v", u, err, want)
		}
	}
}

// The messages are API sentences for the callback_url attribute.
func TestCheckURLMessages(t *testing.T) {
	for _, err := range []error{ErrInvalidURL, ErrScheme, ErrNoHost, ErrUserinfo, ErrInvalidHost,
		ErrAmbiguousHost, ErrPort, ErrPrivateAddress, ErrInternalHost} {
		if m := err.Error(); !strings.HasPrefix(m, "callback_url ") || strings.ContainsAny(m, "\n%") {
			t.Errorf("message %q", m)
		}
	}
	if ErrPrivateAddress.Error() != "callback_url must not point to a private, loopback or link-local address" {
		t.Error(ErrPrivateAddress)
	}
	if !errors.Is(ErrRefused, ErrRefused) {
		t.Fail()
	}
}
