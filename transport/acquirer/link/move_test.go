package link

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/paygate/gateway/transport/acquirer"
	"github.com/paygate/gateway/transport/acquirer/host"
)

func moveReq(kind, ref string, amount int64, trace string) acquirer.MoveRequest {
	return acquirer.MoveRequest{
		Kind: kind, STAN: acquirer.STAN(ref + kind), RRN: acquirer.RRN(ref), At: time.Now(), Amount: amount,
		Currency: "USD", MerchantID: "m1", OrigMTI: "0100", OrigTrace: trace,
		PAN: acquirer.CardVisaApproved, ExpMonth: "12", ExpYear: "2031",
	}
}

// reportRows is the host's settlement report for today without its header.
func reportRows(t *testing.T, s *sandbox) []string {
	t.Helper()
	var b bytes.Buffer
	if err := s.host.WriteReport(&b, time.Now().UTC().Format(time.DateOnly)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	return lines[1:]
}

func TestCaptureRefundAndReversalMoveOnce(t *testing.T) {
	s := newSandbox(t, Config{Timeout: 2 * time.Second})
	ctx := context.Background()
	auth, err := s.acq.Authorize(ctx, req("a1", acquirer.CardVisaApproved))
	if err != nil || !auth.Approved || len(auth.Trace) != 16 {
		t.Fatalf("authorisation: %+v %v", auth, err)
	}
	capture := moveReq(acquirer.MoveCapture, "a1", 600, auth.Trace)
	first, err := s.acq.Move(ctx, capture)
	if err != nil || !first.Approved || first.ARN == "" {
		t.Fatalf("capture: %+v %v", first, err)
	}
	// The repeat (0221) is answered with the first answer: one capture.
	capture.Repeat = true
	again, err := s.acq.Move(ctx, capture)
	if err != nil || again != first {
		t.Fatalf("repeated capture: %+v %v, want %+v", again, err, first)
	}
	// A second, different capture beyond the authorised amount is declined
	// through the response code table.
	over := moveReq(acquirer.MoveCapture, "a1", 600, auth.Trace)
	over.RRN = acquirer.RRN("a1-other")
	over.STAN = acquirer.STAN("other")
	if r, err := s.acq.Move(ctx, over); err != nil || r.Approved || r.DeclineCode != "3.08" {
		t.Fatalf("capture of an unknown authorisation: %+v %v", r, err)
	}
	refund := moveReq(acquirer.MoveRefund, "r1", 200, "")
	if r, err := s.acq.Move(ctx, refund); err != nil || !r.Approved {
		t.Fatalf("refund: %+v %v", r, err)
	}
	refund.Repeat = true
	if r, err := s.acq.Move(ctx, refund); err != nil || !r.Approved {
		t.Fatalf("repeated refund: %+v %v", r, err)
	}
	// A reversal of an authorisation whose answer never came (field 90
	// all zeros) finds it by its RRN.
	if _, err := s.acq.Authorize(ctx, req("a2", acquirer.CardVisaApproved)); err != nil {
		t.Fatal(err)
	}
	if r, err := s.acq.Move(ctx, moveReq(acquirer.MoveReversal, "a2", 1000, "")); err != nil || !r.Approved {
		t.Fatalf("reversal: %+v %v", r, err)
	}
	if r, err := s.acq.Move(ctx, moveReq(acquirer.MoveCapture, "a2", 1000, "")); err != nil || r.Approved {
		t.Fatalf("capture of a reversed authorisation: %+v %v", r, err)
	}
	rows := reportRows(t, s)
	var kinds []string
	for _, r := range rows {
		f := strings.Split(r, ",")
		kinds = append(kinds, f[4]+":"+f[5])
	}
	if strings.Join(kinds, " ") != "capture:600 refund:200" {
		t.Fatalf("settlement report rows %q", rows)
	}
}

// A movement keeps its STAN (the host knows its repeats by STAN and field
// 7): while another request waiting on the line has it, the movement fails
// at once with ErrSTANBusy rather than going out with another STAN, and
// goes through with its own once that one is answered.
func TestMovementKeepsItsSTAN(t *testing.T) {
	s := newSandbox(t, Config{Timeout: 5 * time.Second})
	ctx := context.Background()
	a1, err := s.acq.Authorize(ctx, req("k1", acquirer.CardVisaApproved))
	if err != nil {
		t.Fatal(err)
	}
	a2, err := s.acq.Authorize(ctx, req("k2", acquirer.CardVisaApproved))
	if err != nil {
		t.Fatal(err)
	}
	s.host.SetFaults(host.Faults{LatencyMS: 300})
	first := moveReq(acquirer.MoveCapture, "k1", 100, a1.Trace)
	second := moveReq(acquirer.MoveCapture, "k2", 100, a2.Trace)
	second.STAN = first.STAN
	done := make(chan error, 1)
	go func() {
		_, err := s.acq.Move(ctx, first)
		done <- err
	}()
	waitFor(t, "the first capture waiting on the line", func() bool {
		s.acq.client.mu.Lock()
		defer s.acq.client.mu.Unlock()
		return s.acq.client.pending[first.STAN] != nil
	})
	// The second waits for the first's answer, then goes with its own
	// STAN kept: its own answer, not a "no answer" nor the first's.
	if r, err := s.acq.Move(ctx, second); err != nil || !r.Approved {
		t.Fatalf("the second capture, its STAN on the line when it was sent: %+v %v", r, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r, err := s.acq.Move(ctx, second); err != nil || !r.Approved {
		t.Fatalf("the second capture repeated: %+v %v", r, err)
	}
}
