package webhook

import (
	"encoding/json"
	"testing"
)

// statusOKByMap is the plain reading of the acknowledgement rule: decode
// the body into a map and look at "status". statusOK must agree with it.
func statusOKByMap(body []byte) bool {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return false
	}
	raw, ok := m["status"]
	if !ok {
		return false
	}
	var s string
	return json.Unmarshal(raw, &s) == nil && s == "ok"
}

var statusOKCases = []struct {
	body string
	want bool
}{
	{`{"status":"ok"}`, true},
	{" \n{ \"status\" : \"ok\" }\r\n\t", true},
	{`{"received":true,"status":"ok","n":[1,{"status":"no"}]}`, true},
	{`{"status":"\u006fk"}`, true},
	{`{"stat\u0075s":"ok"}`, true},
	{`{"status":"no","status":"ok"}`, true}, // the last one counts
	{`{"status":"ok","status":"no"}`, false},
	{"{\"status\":\"ok\",\"x\":\"\xff\"}", true}, // invalid UTF-8 elsewhere
	{`{"status":"ok","x":"\ud800"}`, true},       // a lone surrogate elsewhere
	{`{"status":"OK"}`, false},
	{`{"Status":"ok"}`, false},
	{`{"status":"ok "}`, false},
	{`{"status":1}`, false},
	{`{"status":null}`, false},
	{`{"status":["ok"]}`, false},
	{`{"status":{"ok":true}}`, false},
	{`{"result":"ok"}`, false},
	{`{}`, false},
	{`["ok"]`, false},
	{`"ok"`, false},
	{`ok`, false},
	{`null`, false},
	{``, false},
	{`{"status":"ok"} trailing`, false},
	{`{"status":"ok"}{}`, false},
	{`{"status":"ok"`, false},
	{`{"status":"ok",}`, false},
	{`{"status":"ok","x":01}`, false},
	{`{"status":"ok","x":[1,}`, false},
}

func TestStatusOK(t *testing.T) {
	for _, c := range statusOKCases {
		if got := statusOK([]byte(c.body)); got != c.want {
			t.Errorf("statusOK(%q) = %t, want %t", c.body, got, c.want)
		}
		if byMap := statusOKByMap([]byte(c.body)); byMap != c.want {
			t.Errorf("the map reading of %q = %t, the table says %t", c.body, byMap, c.want)
		}
	}
}

// FuzzStatusOK checks statusOK against the map reading on any body.
func FuzzStatusOK(f *testing.F) {
	for _, c := range statusOKCases {
		f.Add([]byte(c.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if got, want := statusOK(body), statusOKByMap(body); got != want {
			t.Fatalf("statusOK(%q) = %t, the map reading says %t", body, got, want)
		}
	})
}

func BenchmarkStatusOK(b *testing.B) {
	body := []byte(`{"status":"ok","received":true}`)
	b.ReportAllocs()
	for b.Loop() {
		if !statusOK(body) {
			b.Fatal("not ok")
		}
	}
}
