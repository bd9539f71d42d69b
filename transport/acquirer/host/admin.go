package host

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/paygate/gateway/order/currency"
)

// ReportHeader is the settlement report's CSV header (contract section 12).
var ReportHeader = []string{"date", "mid", "rrn", "arn", "type", "amount", "currency"}

// AdminHandler serves the host's HTTP side:
//
//	GET  /settlement-report?date=YYYY-MM-DD  the day's settlement report, CSV
//	POST /faults                             set the runtime faults (JSON Faults)
//	GET  /faults                             the faults in force
//	GET  /healthz                            200 while the host runs
//
// It has no authentication of its own: bind it to loopback or a private
// network (docs/acquirer.md).
func (h *Host) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /settlement-report", h.serveReport)
	mux.HandleFunc("POST /faults", h.serveSetFaults)
	mux.HandleFunc("GET /faults", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(h.Faults())
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	return mux
}

func (h *Host) serveReport(w http.ResponseWriter, r *http.Request) {
	date := r.URL.Query().Get("date")
	if _, err := time.Parse(time.DateOnly, date); err != nil {
		http.Error(w, "date: want YYYY-MM-DD", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	if err := h.WriteReport(w, date); err != nil {
		h.cfg.Logger.Error("acquirer host: settlement report", "date", date, "error", err)
	}
}

// WriteReport writes date's settlement report as CSV: every approved
// capture, sale and refund the host recorded that UTC day, in ledger order,
// less sales reversed that day or the next.
func (h *Host) WriteReport(w io.Writer, date string) error {
	day, err := time.Parse(time.DateOnly, date)
	if err != nil {
		return err
	}
	reversed := map[string]bool{}
	for _, d := range []string{date, day.AddDate(0, 0, 1).Format(time.DateOnly)} {
		if err := h.ledger.read(d, func(r *Record) {
			if r.Kind == KindReversal && r.Original != "" {
				reversed[r.Original] = true
			}
		}); err != nil {
			return err
		}
	}
	cw := csv.NewWriter(w)
	cw.Write(ReportHeader)
	err = h.ledger.read(date, func(r *Record) {
		if !r.approved() || r.Kind == KindAuth || r.Kind == KindReversal ||
			r.Kind == KindSale && reversed[key(r.Kind, r.MID, r.RRN, "", "")] {
			return
		}
		cur := r.Currency
		if c, ok := currency.LookupNumeric(r.Currency); ok {
			cur = c.Alpha
		}
		cw.Write([]string{r.Date, strings.TrimRight(r.MID, " "), r.RRN, r.ARN, r.Kind, strconv.FormatInt(r.Amount, 10), cur})
	})
	cw.Flush()
	if err != nil {
		return err
	}
	return cw.Error()
}

func (h *Host) serveSetFaults(w http.ResponseWriter, r *http.Request) {
	var f Faults
	dec := json.NewDecoder(io.LimitReader(r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		http.Error(w, "faults: "+err.Error(), http.StatusBadRequest)
		return
	}
	if f.LatencyMS < 0 || f.LatencyMS > 600_000 || f.DropAnswers < 0 || f.DropAnswers > 1 ||
		f.DuplicateAnswers < 0 || f.DuplicateAnswers > 1 {
		http.Error(w, "faults: latency_ms 0..600000, drop_answers and duplicate_answers 0..1", http.StatusBadRequest)
		return
	}
	h.SetFaults(f)
	h.cfg.Logger.Info("acquirer host: faults set", "latency_ms", f.LatencyMS, "drop_answers", f.DropAnswers,
		"duplicate_answers", f.DuplicateAnswers, "down", f.Down)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, "{\"latency_ms\":%d,\"drop_answers\":%g,\"duplicate_answers\":%g,\"down\":%t}\n",
		f.LatencyMS, f.DropAnswers, f.DuplicateAnswers, f.Down)
}
