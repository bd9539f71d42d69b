package node_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/paygate/gateway/node/nodetest"
)

// Browser tests of the hosted form and the sandbox 3-D Secure page, in
// Debian's Chromium driven by chromedp, against a real gatewayd. A test shop
// (httptest) stands for the merchant: its success_url and fail_url pages, and
// a page that embeds the form in an iframe and records the messages it gets.
//
// Chromium runs headless, as root without its sandbox, with background
// networking off and a fresh profile (see .library machine notes). Without
// Chromium the tests skip, unless CI=true, where they must run
// (scripts/test installs it).
//
// UPDATE_SCREENSHOTS=1 writes the screenshots of docs/hosted-form.md.

const browserTimeout = 30 * time.Second

func chromiumPath(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("Chromium is not installed; the browser tests must run in CI (scripts/test installs it)")
	}
	t.Skip("Chromium is not installed (apt-get install chromium); skipping the browser tests")
	return ""
}

// browser is one headless Chromium; each test gets its own tab (in a
// browser context of its own, with its own cookies, when given
// chromedp.WithNewBrowserContext()).
type browser struct {
	ctx context.Context
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromiumPath(t)
	profile, err := os.MkdirTemp("", "chromium-profile-")
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // the tests run as root
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(390, 844), // a phone-sized window
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		// Chromium's helpers may still write into the profile for a moment.
		for range 50 {
			if os.RemoveAll(profile) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return &browser{ctx: ctx}
}

// tab is one page with a record of every request it made.
type tab struct {
	t   *testing.T
	ctx context.Context

	mu   sync.Mutex
	reqs []*network.Request
}

// Collects the Content-Security-Policy violations of every document the tab
// loads (injected through the DevTools protocol, so not subject to the CSP).
const cspRecorder = `window.__csp = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__csp.push(e.violatedDirective + " " + e.blockedURI);
});`

func (b *browser) tab(t *testing.T, opts ...chromedp.ContextOption) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx, opts...)
	t.Cleanup(cancel)
	tb := &tab{t: t, ctx: ctx}
	// A phone's viewport: the pages must work at 390 CSS pixels.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank"), chromedp.EmulateViewport(390, 844)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok && e.Request != nil {
			tb.mu.Lock()
			tb.reqs = append(tb.reqs, e.Request)
			tb.mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument,
			page.AddScriptToEvaluateOnNewDocumentParams{Source: cspRecorder})
		return err
	}))
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func (tb *tab) do(steps ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, browserTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		tb.t.Fatalf("browser: %v", err)
	}
}

func (tb *tab) text(id string) string {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, browserTimeout)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID(id)))
	if err != nil {
		tb.t.Fatalf("text of #%s: %v", id, err)
	}
	return s
}

func eval[T any](tb *tab, expr string) T {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, browserTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		tb.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitURL waits until the tab's address starts with prefix.
func (tb *tab) waitURL(prefix string) string {
	tb.t.Helper()
	deadline := time.Now().Add(browserTimeout)
	last := ""
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(tb.ctx, 2*time.Second)
		loc, err := chromedp.Run(ctx, chromedp.Location())
		cancel()
		if err == nil {
			last = loc
			if strings.HasPrefix(loc, prefix) {
				return loc
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	tb.t.Fatalf("the page never reached %s (last at %s)", prefix, last)
	return ""
}

// waitText waits until the text of #id contains want; what says what the
// wait is for, in the failure.
func (tb *tab) waitText(id, want, what string) {
	tb.t.Helper()
	deadline := time.Now().Add(browserTimeout)
	for got := tb.text(id); !strings.Contains(got, want); got = tb.text(id) {
		if time.Now().After(deadline) {
			tb.t.Fatalf("%s: #%s = %q, want %q", what, id, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// noCSPViolations checks the current gateway page reported none.
func (tb *tab) noCSPViolations() {
	tb.t.Helper()
	if v := eval[[]string](tb, "window.__csp || []"); len(v) > 0 {
		tb.t.Fatalf("Content-Security-Policy violations: %v", v)
	}
}

func (tb *tab) screenshot(name string) {
	tb.t.Helper()
	if os.Getenv("UPDATE_SCREENSHOTS") != "1" {
		return
	}
	ctx, cancel := context.WithTimeout(tb.ctx, browserTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100: PNG
	if err != nil {
		tb.t.Fatal(err)
	}
	path := filepath.Join("..", "docs", "img", name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
	tb.t.Logf("wrote %s", path)
}

// checkRequests: every request the pages made went to the gateway, except
// the customer's return to the shop's success_url or fail_url; the card
// number and CVV are in no address (only in the POST body to the gateway).
// wantPay says whether the page must have sent the card (once valid).
func (tb *tab) checkRequests(gateway string, returnPrefixes []string, card, cvv string, wantPay bool) {
	tb.t.Helper()
	tb.mu.Lock()
	reqs := append([]*network.Request(nil), tb.reqs...)
	tb.mu.Unlock()
	gw, _ := url.Parse(gateway)
	paid := false
	for _, r := range reqs {
		u, err := url.Parse(r.URL)
		if err != nil || u.Scheme == "about" || u.Scheme == "data" {
			continue
		}
		if u.Host != gw.Host {
			allowed := false
			for _, p := range returnPrefixes {
				allowed = allowed || strings.HasPrefix(r.URL, p)
			}
			if !allowed {
				tb.t.Errorf("a request to another host: %s %s", r.Method, r.URL)
			}
		}
		if strings.Contains(r.URL, card) {
			tb.t.Errorf("the card number is in an address: %s", r.URL)
		}
		for _, seg := range strings.Split(u.Path, "/") {
			if seg == cvv {
				tb.t.Errorf("the CVV is in an address: %s", r.URL)
			}
		}
		for _, vs := range u.Query() {
			for _, v := range vs {
				if v == cvv || strings.Contains(v, card) {
					tb.t.Errorf("card data in a query: %s", r.URL)
				}
			}
		}
		if strings.HasSuffix(u.Path, "/pay") {
			if r.Method != "POST" || !r.HasPostData || u.Host != gw.Host {
				tb.t.Errorf("the card went out other than in a POST body to the gateway: %s %s", r.Method, r.URL)
			}
			paid = true
		}
	}
	if paid != wantPay {
		tb.t.Errorf("payment request sent: %v, want %v (%d requests)", paid, wantPay, len(reqs))
	}
}

// shop is the merchant's site: success and fail pages, and a page that
// embeds a form in an iframe.
type shop struct {
	srv *httptest.Server
}

func newShop(t *testing.T) *shop {
	s := &shop{}
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><title>thanks</title><h1 id="landed">success %s %s</h1>`,
			r.URL.Query().Get("order_id"), r.URL.Query().Get("status"))
	})
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><title>sorry</title><h1 id="landed">fail %s %s</h1>`,
			r.URL.Query().Get("order_id"), r.URL.Query().Get("status"))
	})
	mux.HandleFunc("/checkout", func(w http.ResponseWriter, r *http.Request) {
		form := r.URL.Query().Get("form")
		fmt.Fprintf(w, `<!doctype html><html><head><title>checkout</title></head><body>
<h1>Checkout</h1>
<iframe id="pay" title="Payment" src="%s" width="380" height="760"></iframe>
<script>
window.messages = [];
window.addEventListener("message", function (e) { window.messages.push({origin: e.origin, data: e.data}); });
</script></body></html>`, form)
	})
	mux.HandleFunc("/favicon.ico", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	return s
}

// fillCard types a card into the form; opts select the form's frame.
func fillCard(tb *tab, pan, name, month, year, cvv string, opts ...chromedp.QueryOption) {
	tb.t.Helper()
	tb.do(
		chromedp.WaitVisible(chromedp.ID("cc-number"), opts...),
		chromedp.SendKeys(chromedp.ID("cc-number"), pan, opts...),
		chromedp.SendKeys(chromedp.ID("cc-name"), name, opts...),
		chromedp.SendKeys(chromedp.ID("cc-exp-month"), month, opts...),
		chromedp.SendKeys(chromedp.ID("cc-exp-year"), year, opts...),
		chromedp.SendKeys(chromedp.ID("cc-csc"), cvv, opts...),
	)
}

func browserInit(t *testing.T, m *nodetest.Merchant, s *shop, mutate func(map[string]any)) (string, string) {
	t.Helper()
	id := newOrderID("web")
	body := initBody(id, 1020, "USD")
	body["success_url"] = s.srv.URL + "/ok"
	body["fail_url"] = s.srv.URL + "/fail"
	body["dynamic_descriptor"] = "EXAMPLE SHOP"
	if mutate != nil {
		mutate(body)
	}
	return id, initForm(t, m, body)
}

func TestBrowserHostedForm(t *testing.T) {
	b := newBrowser(t)
	n := nodetest.Start(t, nodetest.Options{})
	m := n.CreateMerchant(t, 10000)
	s := newShop(t)
	// The customer's return to the shop (and the browser's favicon request there).
	returns := []string{s.srv.URL + "/ok?", s.srv.URL + "/fail?", s.srv.URL + "/favicon.ico"}
	const cvv = "737"

	t.Run("approved card lands on success_url", func(t *testing.T) {
		id, formURL := browserInit(t, m, s, nil)
		tb := b.tab(t)
		tb.do(chromedp.Navigate(formURL), chromedp.WaitVisible(chromedp.ID("pg-pay")))
		if lang := eval[string](tb, "document.documentElement.lang"); lang != "en" {
			t.Fatalf("lang %q", lang)
		}
		if amount := strings.ReplaceAll(tb.text("pg-amount"), "\u00a0", " "); amount != "10.20 USD" {
			t.Fatalf("amount %q", amount)
		}
		if d := tb.text("pg-description"); d != "Blue running shoes" {
			t.Fatalf("description %q", d)
		}
		tb.screenshot("hosted-form.png")
		fillCard(tb, "4111 1111 1111 1111", "Jane Doe", "12", "2035", cvv)
		tb.noCSPViolations()
		tb.do(chromedp.Click(chromedp.ID("pg-pay")))
		landed := tb.waitURL(s.srv.URL + "/ok?")
		q, _ := url.Parse(landed)
		if q.Query().Get("order_id") != id || q.Query().Get("status") != "authorized" {
			t.Fatalf("landed on %s", landed)
		}
		o := m.Post(t, "status", map[string]any{"order_id": id})
		if o.Str("status") != "authorized" || o.Str("cvv_check") != "M" || o.Str("payment_source.masked_card_number") != "411111******1111" {
			t.Fatalf("order after the form: %s", o.Body)
		}
		tb.checkRequests(n.URL(), returns, "4111111111111111", cvv, true)
	})

	t.Run("declined card lands on fail_url", func(t *testing.T) {
		id, formURL := browserInit(t, m, s, nil)
		tb := b.tab(t)
		tb.do(chromedp.Navigate(formURL))
		fillCard(tb, "4000000000000002", "Jane Doe", "12", "2035", cvv)
		tb.do(chromedp.Click(chromedp.ID("pg-pay")))
		landed := tb.waitURL(s.srv.URL + "/fail?")
		if q, _ := url.Parse(landed); q.Query().Get("order_id") != id || q.Query().Get("status") != "declined" {
			t.Fatalf("landed on %s", landed)
		}
		if o := m.Post(t, "status", map[string]any{"order_id": id}); o.Str("decline.code") != "3.08" {
			t.Fatalf("order: %s", o.Body)
		}
		tb.checkRequests(n.URL(), returns, "4000000000000002", cvv, true)
	})

	for _, c := range []struct{ outcome, landing, status string }{
		{"success", "/ok?", "authorized"},
		{"failure", "/fail?", "declined"},
	} {
		t.Run("3-D Secure "+c.outcome, func(t *testing.T) {
			id, formURL := browserInit(t, m, s, nil)
			tb := b.tab(t)
			tb.do(chromedp.Navigate(formURL))
			fillCard(tb, "4000000000003220", "Jane Doe", "12", "2035", cvv)
			tb.do(chromedp.Click(chromedp.ID("pg-pay")))
			tb.waitURL(n.URL() + "/api/v3/3ds/")
			tb.do(chromedp.WaitVisible(chromedp.ID("acs-" + c.outcome)))
			if card := tb.text("acs-card"); card != "400000******3220" {
				t.Fatalf("issuer page card %q", card)
			}
			tb.noCSPViolations()
			if c.outcome == "success" {
				tb.screenshot("issuer-3ds.png")
			}
			tb.do(chromedp.Click(chromedp.ID("acs-" + c.outcome)))
			landed := tb.waitURL(s.srv.URL + c.landing)
			if q, _ := url.Parse(landed); q.Query().Get("order_id") != id || q.Query().Get("status") != c.status {
				t.Fatalf("landed on %s", landed)
			}
			o := m.Post(t, "status", map[string]any{"order_id": id})
			want := map[string]string{"success": "Y", "failure": "N"}[c.outcome]
			if o.Str("status") != c.status || o.Str("three_ds.authentication_result") != want {
				t.Fatalf("order after 3-D Secure: %s", o.Body)
			}
			tb.checkRequests(n.URL(), returns, "4000000000003220", cvv, true)
		})
	}

	t.Run("German", func(t *testing.T) {
		_, formURL := browserInit(t, m, s, func(b map[string]any) {
			b["payment_form"] = map[string]any{"language": "de"}
			b["currency"] = "EUR"
		})
		tb := b.tab(t)
		tb.do(chromedp.Navigate(formURL), chromedp.WaitVisible(chromedp.ID("pg-pay")))
		if lang := eval[string](tb, "document.documentElement.lang"); lang != "de" {
			t.Fatalf(`want <html lang="de">, got %q`, lang)
		}
		for id, want := range map[string]string{"pg-title": "Zahlung", "pg-pay": "10,20\u00a0EUR bezahlen"} {
			if got := tb.text(id); got != want {
				t.Errorf("#%s = %q, want %q", id, got, want)
			}
		}
		if label := eval[string](tb, `document.querySelector("label[for=cc-number]").textContent`); label != "Kartennummer" {
			t.Errorf("label %q", label)
		}
		tb.screenshot("hosted-form-de.png")
		tb.noCSPViolations()
	})

	t.Run("hints before submit, errors beside the field", func(t *testing.T) {
		id, formURL := browserInit(t, m, s, nil)
		tb := b.tab(t)
		tb.do(chromedp.Navigate(formURL))
		fillCard(tb, "4111111111111112", "Jane Doe", "13", "2020", "12")
		// Pay stays where it was pressed. The press takes the focus from
		// the security code, whose hint used to appear at once and push
		// Pay down: the release landed beside the button and the click
		// was lost (CI saw the focus left on Pay, no submit).
		eval[bool](tb, `(function () {
			var pay = document.getElementById("pg-pay"), top = null;
			window.payMoved = null;
			pay.addEventListener("pointerdown", function () { top = pay.getBoundingClientRect().top; });
			document.addEventListener("pointerup", function () { window.payMoved = pay.getBoundingClientRect().top - top; }, true);
			return true;
		})()`)
		tb.do(chromedp.Click(chromedp.ID("pg-pay")))
		if moved := eval[float64](tb, "window.payMoved === null ? NaN : window.payMoved"); moved != 0 {
			t.Errorf("Pay moved %v px between its press and its release", moved)
		}
		for field, want := range map[string]string{
			"cc-number": "not a valid card number", "cc-exp-month": "01 to 12", "cc-csc": "3-digit",
		} {
			if got := tb.text(field + "-error"); !strings.Contains(got, want) {
				t.Errorf("#%s-error = %q, want %q", field, got, want)
			}
			if inv := eval[string](tb, `document.getElementById("`+field+`").getAttribute("aria-invalid")`); inv != "true" {
				t.Errorf("#%s aria-invalid = %q", field, inv)
			}
			if desc := eval[string](tb, `document.getElementById("`+field+`").getAttribute("aria-describedby")`); !strings.Contains(desc, field+"-error") {
				t.Errorf("#%s is not described by its error: %q", field, desc)
			}
		}
		if focused := eval[string](tb, "document.activeElement.id"); focused != "cc-number" {
			t.Errorf("focus on %q, want the first invalid field", focused)
		}
		tb.screenshot("hosted-form-errors.png")
		if o := m.Post(t, "status", map[string]any{"order_id": id}); o.Str("status") != "created" {
			t.Fatalf("an invalid card reached the gateway: %s", o.Body)
		}
		tb.checkRequests(n.URL(), returns, "4111111111111112", "12", false)
		tb.noCSPViolations()
	})

	t.Run("a press on Pay released elsewhere still shows the hint", func(t *testing.T) {
		id, formURL := browserInit(t, m, s, nil)
		tb := b.tab(t)
		tb.do(chromedp.Navigate(formURL))
		fillCard(tb, "4111111111111111", "Jane Doe", "12", "2035", "12")
		tb.do(chromedp.ScrollIntoView(chromedp.ID("pg-pay")))
		pay := eval[map[string]float64](tb, `(function () {
			var r = document.getElementById("pg-pay").getBoundingClientRect();
			return {x: r.left + r.width / 2, y: r.top + r.height / 2, h: r.height};
		})()`)
		// Pressed on Pay, released well above it: no click, no submit.
		tb.do(
			chromedp.MouseEvent("mousePressed", pay["x"], pay["y"], chromedp.ButtonLeft),
			chromedp.MouseEvent("mouseReleased", pay["x"], pay["y"]-3*pay["h"], chromedp.ButtonLeft),
		)
		tb.waitText("cc-csc-error", "3-digit", "the hint after a press on Pay released elsewhere")
		if general := tb.text("pg-error"); general != "" {
			t.Errorf("#pg-error = %q: the form was submitted", general)
		}
		if o := m.Post(t, "status", map[string]any{"order_id": id}); o.Str("status") != "created" {
			t.Fatalf("the press paid: %s", o.Body)
		}
	})

	t.Run("the same token cannot pay twice", func(t *testing.T) {
		id, formURL := browserInit(t, m, s, nil)
		first, second := b.tab(t), b.tab(t)
		first.do(chromedp.Navigate(formURL))
		second.do(chromedp.Navigate(formURL))
		fillCard(first, "4111111111111111", "Jane Doe", "12", "2035", cvv)
		fillCard(second, "5555555555554444", "Jane Doe", "12", "2035", cvv)
		first.do(chromedp.Click(chromedp.ID("pg-pay")))
		first.waitURL(s.srv.URL + "/ok?")
		// The second tab still shows the form; its payment is refused.
		second.do(chromedp.Click(chromedp.ID("pg-pay")))
		second.waitText("pg-error", "no longer be paid", "second payment not refused")
		if disabled := eval[bool](second, `document.getElementById("pg-pay").disabled`); !disabled {
			t.Error("the pay button of a used form stays enabled")
		}
		// Opening the used form again offers no card inputs.
		second.do(chromedp.Navigate(formURL), chromedp.WaitVisible(chromedp.ID("pg-live")))
		if n := eval[int](second, `document.querySelectorAll("#pg-form").length`); n != 0 {
			t.Fatal("a used form offers the card inputs again")
		}
		o := m.Post(t, "status", map[string]any{"order_id": id})
		if o.Str("payment_source.masked_card_number") != "411111******1111" {
			t.Fatalf("the first card must be the one charged: %s", o.Body)
		}
		if txns, _ := o.Get("transactions").(map[string]any); len(txns) != 1 {
			t.Fatalf("want one transaction: %s", o.Body)
		}
	})

	t.Run("a parent page embedding the form receives the message", func(t *testing.T) {
		id, formURL := browserInit(t, m, s, func(b map[string]any) {
			b["website"] = s.srv.URL // the parent's origin: frame-ancestors and the message's target
			delete(b, "success_url") // the form shows the result and stays in the frame
		})
		tb := b.tab(t)
		tb.do(chromedp.Navigate(s.srv.URL + "/checkout?form=" + url.QueryEscape(formURL)))
		frame := waitFrame(tb, "pay")
		fillCard(tb, "4111111111111111", "Jane Doe", "12", "2035", cvv, chromedp.FromNode(frame))
		// Submit from the keyboard: Enter in the last field.
		tb.do(chromedp.SendKeys(chromedp.ID("cc-csc"), kb.Enter, chromedp.FromNode(frame)))
		deadline := time.Now().Add(browserTimeout)
		for {
			got := eval[[]map[string]any](tb, "window.messages")
			var last map[string]any
			for _, msg := range got {
				if d, _ := msg["data"].(map[string]any); d != nil && msg["origin"] == n.URL() {
					last = d
				}
			}
			if last != nil && last["status"] == "authorized" {
				if last["type"] != "order-status" || last["order_id"] != id || last["amount"] != float64(1020) ||
					last["currency"] != "USD" || last["decline"] != nil {
					t.Fatalf("message: %v", last)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the parent got no authorized message: %v", got)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if loc := eval[string](tb, "location.href"); !strings.HasPrefix(loc, s.srv.URL+"/checkout") {
			t.Fatalf("the parent page navigated away: %s", loc)
		}
		tb.checkRequests(n.URL(), []string{s.srv.URL + "/checkout", s.srv.URL + "/favicon.ico"}, "4111111111111111", cvv, true)
	})
}

// waitFrame returns the iframe element once its document (the form) is loaded.
func waitFrame(tb *tab, id string) *chromedp.Node {
	tb.t.Helper()
	deadline := time.Now().Add(browserTimeout)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(tb.ctx, 2*time.Second)
		nodes, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.ID(id)))
		if err == nil && len(nodes) == 1 && nodes[0].ContentDocument != nil {
			_, err = chromedp.Run(ctx, chromedp.Nodes(chromedp.ID("cc-number"), chromedp.FromNode(nodes[0])))
			if err == nil {
				cancel()
				return nodes[0]
			}
		}
		cancel()
		time.Sleep(50 * time.Millisecond)
	}
	tb.t.Fatalf("the form never loaded in #%s", id)
	return nil
}

func TestBrowserExpiredForm(t *testing.T) {
	b := newBrowser(t)
	// The second case must load the form before it expires: 3 s leaves room
	// for a loaded machine (at 1 s a busy one missed it).
	n := nodetest.Start(t, nodetest.Options{Args: []string{"--form-ttl", "3s"}})
	m := n.CreateMerchant(t, 10000)
	s := newShop(t)

	t.Run("expired form shows it and cannot be paid", func(t *testing.T) {
		id, formURL := browserInit(t, m, s, nil)
		m.WaitStatus(t, id, "expired", 10*time.Second)
		tb := b.tab(t)
		tb.do(chromedp.Navigate(formURL), chromedp.WaitVisible(chromedp.ID("pg-expired")))
		if got := tb.text("pg-expired"); !strings.Contains(got, "expired") {
			t.Fatalf("expired notice %q", got)
		}
		if n := eval[int](tb, `document.querySelectorAll("input").length`); n != 0 {
			t.Fatal("an expired form offers inputs")
		}
		tb.noCSPViolations()
	})

	t.Run("a form open when it expires cannot be paid", func(t *testing.T) {
		tb := b.tab(t) // before the form's lifetime starts
		id, formURL := browserInit(t, m, s, nil)
		tb.do(chromedp.Navigate(formURL), chromedp.WaitVisible(chromedp.ID("pg-pay")))
		m.WaitStatus(t, id, "expired", 10*time.Second)
		fillCard(tb, "4111111111111111", "Jane Doe", "12", "2035", "737")
		tb.do(chromedp.Click(chromedp.ID("pg-pay")))
		tb.waitText("pg-error", "no longer be paid", "payment of an expired form not refused")
		if o := m.Post(t, "status", map[string]any{"order_id": id}); o.Str("status") != "expired" {
			t.Fatalf("order: %s", o.Body)
		}
	})
}
