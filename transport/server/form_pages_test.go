package server

import (
	"strings"
	"testing"

	"github.com/paygate/gateway/order"
)

func TestFormatAmount(t *testing.T) {
	for _, c := range []struct {
		amount   int64
		currency string
		exp      int
		lang     string
		want     string
	}{
		{1020, "USD", 2, "en", "10.20 USD"},
		{1020, "EUR", 2, "de", "10,20 EUR"},
		{102050, "USD", 2, "en", "1,020.50 USD"},
		{123456789, "EUR", 2, "de", "1.234.567,89 EUR"},
		{123456789, "EUR", 2, "fr", "1\u202f234\u202f567,89 EUR"},
		{500, "JPY", 0, "en", "500 JPY"},
		{1234, "KWD", 3, "es", "1,234 KWD"},
		{5, "USD", 2, "en", "0.05 USD"},
		{7, "CLF", 4, "en", "0.0007 CLF"},
		{1020, "USD", 2, "xx", "10.20 USD"},
	} {
		got := strings.ReplaceAll(formatAmount(c.amount, c.currency, c.exp, c.lang), "\u00a0", " ")
		if got != c.want {
			t.Errorf("formatAmount(%d, %s, %d, %s) = %q, want %q", c.amount, c.currency, c.exp, c.lang, got, c.want)
		}
	}
}

// Every language has every text the English pages have, and nothing else.
func TestPageTextsComplete(t *testing.T) {
	for lang, texts := range pageTexts {
		for k := range pageTexts["en"] {
			if texts[k] == "" {
				t.Errorf("%s: missing %q", lang, k)
			}
		}
		if len(texts) != len(pageTexts["en"]) {
			t.Errorf("%s: %d texts, en has %d", lang, len(texts), len(pageTexts["en"]))
		}
	}
	for _, lang := range []string{"en", "de", "fr", "es"} {
		if pageLanguage(lang) != lang || pageLanguage(strings.ToUpper(lang)) != lang {
			t.Errorf("language %s not served", lang)
		}
	}
	if pageLanguage("xx") != "en" || pageLanguage("") != "en" {
		t.Error("unknown languages must fall back to en")
	}
}

func TestWebsiteOriginAndPolicy(t *testing.T) {
	for in, want := range map[string]string{
		"https://shop.example/cart?x=1": "https://shop.example",
		"http://127.0.0.1:8081/":        "http://127.0.0.1:8081",
		"Shop.Example":                  "https://shop.example",
		"":                              "",
		"ftp://shop.example":            "",
		"my shop; script-src *":         "",
		"https://a@b.example":           "",
	} {
		if got := websiteOrigin(in); got != want {
			t.Errorf("websiteOrigin(%q) = %q, want %q", in, got, want)
		}
	}
	csp := contentSecurityPolicy(&order.Order{Website: "https://shop.example/x"})
	for _, part := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'",
		"form-action 'self'", "frame-ancestors 'self' https://shop.example"} {
		if !strings.Contains(csp, part) {
			t.Errorf("policy %q lacks %q", csp, part)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("policy allows inline script or eval: %q", csp)
	}
	if got := contentSecurityPolicy(&order.Order{}); !strings.HasSuffix(got, "frame-ancestors *") {
		t.Errorf("no website: %q", got)
	}
}

func TestReturnURL(t *testing.T) {
	o := &order.Order{ID: "o 1", Status: order.StatusAuthorized, SuccessURL: "https://shop.example/ok?cart=7",
		FailURL: "https://shop.example/fail"}
	if got := returnURL(o); got != "https://shop.example/ok?cart=7&order_id=o+1&status=authorized" {
		t.Errorf("success: %s", got)
	}
	o.Status = order.StatusDeclined
	if got := returnURL(o); got != "https://shop.example/fail?order_id=o+1&status=declined" {
		t.Errorf("fail: %s", got)
	}
	o.Status = order.StatusExpired
	if got := returnURL(o); got != "" {
		t.Errorf("expired forms send nobody anywhere: %s", got)
	}
}
