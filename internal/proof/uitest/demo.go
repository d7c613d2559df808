package uitest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/payfile"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/vault"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// Demo is what LoadDemo put in the ledger: three batches as finance meets
// them on a working day.
type Demo struct {
	// Worked is the batch the workers went through: paid, failed,
	// rejected, needs_review, created awaiting its outcome, queued.
	Worked string
	// Held awaits approval; it was loaded by HeldBy.
	Held, HeldBy string
	// Discarded was refused at approval.
	Discarded string
	// ByState lists the externalIds of Worked per state.
	ByState map[lifecycle.State][]string
	// Rows and Total are Worked's figures (Total with its decimals).
	Rows  int
	Total string
}

// demoRows are the rows of the worked batch and where each ends: the
// amounts are chosen so that every state has a distinct sum.
var demoRows = []struct {
	ext, amount, card, to, reason string
}{
	{"INV-2026-0001", "1250.00", "4111 1111 1111 1111", "paid", ""},
	{"INV-2026-0002", "98350.50", "5500 0000 0000 0004", "paid", ""},
	{"INV-2026-0003", "420.75", "4000 0566 5566 5556", "paid", ""},
	{"INV-2026-0004", "15000.00", "4111 1111 1111 1111", "failed", "account closed"},
	{"INV-2026-0005", "2775.50", "5105 1051 0510 5100", "paid", ""},
	{"INV-2026-0006", "310.00", "4012 8888 8888 1881", "rejected", "card expired"},
	{"INV-2026-0007", "1234567.89", "4111 1111 1111 1111", "needs_review", "no answer from the PSP after 3 status checks"},
	{"INV-2026-0008", "88.10", "5555 5555 5555 4444", "needs_review", "PSP answered 500 to the create; status unknown"},
	{"INV-2026-0009", "5000.00", "4000 0566 5566 5556", "created", ""},
	{"INV-2026-0010", "640.00", "4111 1111 1111 1111", "failed", "limit exceeded at the issuer"},
	{"INV-2026-0011", "19.99", "5105 1051 0510 5100", "queued", ""},
	{"INV-2026-0012", "3300.00", "4012 8888 8888 1881", "paid", ""},
}

// LoadDemo loads the demo batches through the loader (card numbers sealed
// with an ephemeral key) and drives the worked batch's payouts through the
// ledger's transitions as the workers would.
func LoadDemo(t testing.TB, rdb redis.UniversalClient) Demo {
	t.Helper()
	ctx := context.Background()
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	led := ledger.New(rdb)
	ld := loader.New(led, queue.New(rdb), vault.Ephemeral(), log)
	dir := t.TempDir()
	load := func(name, content string, a loader.Approval) loader.Result {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		res, err := ld.LoadFile(ctx, p, loader.Options{Approval: a})
		if err != nil || !res.Loaded {
			t.Fatalf("demo load %s: %+v %v", name, res, err)
		}
		return res
	}
	var b strings.Builder
	b.WriteString("externalId,amount,cardNumber\n")
	for _, r := range demoRows {
		fmt.Fprintf(&b, "%s,%s,%s\n", r.ext, r.amount, r.card)
	}
	d := Demo{HeldBy: "alice", ByState: map[lifecycle.State][]string{}, Rows: len(demoRows)}
	worked := load("payouts-2026-11-25.csv", b.String(), loader.Approval{By: "finance-bot"})
	d.Worked, d.Total = worked.Batch, worked.Total.StringFixed(2)
	for i, r := range demoRows {
		d.ByState[lifecycle.State(r.to)] = append(d.ByState[lifecycle.State(r.to)], r.ext)
		if r.to == "queued" {
			continue
		}
		drive(t, led, d.Worked, r.ext, r.to, r.reason, fmt.Sprintf("PSP-%06d", 700100+i))
	}
	held := load("payouts-2026-11-26.csv", "externalId,amount,cardNumber\nDEC-0001,12500.00,4111 1111 1111 1111\nDEC-0002,7300.25,5500 0000 0000 0004\nDEC-0003,410.00,4012 8888 8888 1881\n",
		loader.Approval{Required: true, By: d.HeldBy})
	d.Held = held.Batch
	gone := load("payouts-2026-11-24-duplicate.csv", "externalId,amount,cardNumber\nOLD-0001,990.00,4111 1111 1111 1111\nOLD-0002,10.00,5500 0000 0000 0004\n",
		loader.Approval{Required: true, By: "bob"})
	d.Discarded = gone.Batch
	if _, err := led.Controls().Discard(ctx, d.Discarded, "carol", "sent twice by the ERP export"); err != nil {
		t.Fatal(err)
	}
	return d
}

// drive moves a queued payout to state to as the workers would: its create
// begun, answered, and for paid and failed the outcome recorded.
func drive(t testing.TB, led *ledger.Ledger, batch, ext, to, reason, order string) {
	t.Helper()
	ctx := context.Background()
	if to == "cancelled" {
		if _, err := led.Cancel(ctx, batch, ext, "carol", reason); err != nil {
			t.Fatalf("demo: cancel %s: %v", ext, err)
		}
		return
	}
	if to == "returned" {
		// paid under a watch, then found returned by its first check
		led = led.WithWatch(decide.WatchPolicy{Window: 72 * time.Hour, Intervals: []time.Duration{time.Hour}})
	}
	w := led.As("worker-1:4242")
	if _, err := w.BeginCreate(ctx, batch, ext, 1); err != nil {
		t.Fatal(err)
	}
	if to == "submitting" {
		return
	}
	r := decide.CreateResult{To: lifecycle.State(to), OrderID: order, PSPStatus: "NEW", HTTPStatus: 200}
	switch to {
	case "checking":
		r.OrderID, r.PSPStatus, r.Error, r.HTTPStatus = "", "", reason, 0
	case "paid", "failed", "created", "returned":
		r.To, r.OutcomeWindow = lifecycle.Created, 72*time.Hour
	case "rejected":
		r.OrderID, r.PSPStatus, r.Error, r.HTTPStatus = "", "", reason, 422
	case "needs_review":
		r.OrderID, r.PSPStatus, r.Error, r.HTTPStatus = "", "", reason, 500
	}
	if _, err := w.FinishCreate(ctx, batch, ext, 1, r); err != nil {
		t.Fatalf("demo: finish create of %s: %v", ext, err)
	}
	if to != "paid" && to != "failed" && to != "returned" {
		return
	}
	_, s, err := led.Snapshot(ctx, batch, ext)
	if err != nil {
		t.Fatal(err)
	}
	v, status := decide.VerdictPaid, "SUCCESS"
	if to == "failed" {
		v, status = decide.VerdictFailed, "DECLINED"
	}
	a := decide.OutcomeAnswer{Verdict: v, PSPStatus: status, HTTPStatus: 200}
	if to == "failed" {
		a.Reason = reason
	}
	if _, err := w.RecordOutcome(ctx, s, max(s.OutcomeSeq, 1), a); err != nil {
		t.Fatalf("demo: outcome of %s: %v", ext, err)
	}
	if to == "returned" {
		if _, s, err = led.Snapshot(ctx, batch, ext); err != nil {
			t.Fatal(err)
		}
		a := decide.WatchAnswer{Returned: true, PSPStatus: "RETURNED", Reason: reason, ChangedAt: "2026-11-30T09:00:00Z", HTTP: 200}
		if _, err := w.RecordWatch(ctx, s, a); err != nil {
			t.Fatalf("demo: watch of %s: %v", ext, err)
		}
	}
	if p, _ := led.Get(ctx, batch, ext); string(p.State) != to {
		t.Fatalf("demo: %s is %s, want %s", ext, p.State, to)
	}
}

// EveryState is what LoadEveryState put in the ledger: one working batch
// with payouts in every state of lifecycle.Machine, amounts in the millions.
type EveryState struct {
	Batch, File string
	// ByState lists the batch's externalIds per state.
	ByState map[lifecycle.State][]string
	Rows    int
}

// everyStateReasons are what each state's payouts were told, long as the
// PSP and people write them.
var everyStateReasons = map[lifecycle.State]string{
	lifecycle.Checking:    "timeout after 30s waiting for the PSP's answer to the create request",
	lifecycle.Failed:      "limit exceeded at the issuer: the cardholder's monthly incoming transfer limit was reached",
	lifecycle.Rejected:    "422 Unprocessable Entity: destination card number does not pass the issuer's checks",
	lifecycle.NeedsReview: "PSP answered 500 to the create; status unknown after 3 status checks",
	lifecycle.Cancelled:   "sent twice by the ERP export, the second copy cancelled before it was sent",
	lifecycle.Returned:    "returned by the beneficiary's bank: account closed after the transfer was credited",
}

// testCard is a card number that passes the Luhn check, distinct for each
// n below 10^9.
func testCard(n int) string {
	digits := fmt.Sprintf("400012%09d", n)
	sum := 0
	for i := len(digits) - 1; i >= 0; i-- {
		d := int(digits[i] - '0')
		if (len(digits)-i)%2 == 1 {
			if d *= 2; d > 9 {
				d -= 9
			}
		}
		sum += d
	}
	return digits + fmt.Sprint((10-sum%10)%10)
}

// LoadEveryState loads one batch (approved at load) and drives its payouts
// as the workers and people would until every state of lifecycle.Machine
// holds some: a batch still working, whose pages show every state at
// once. It is the fixture of the pages' width rules.
func LoadEveryState(t testing.TB, rdb redis.UniversalClient) EveryState {
	t.Helper()
	ctx := context.Background()
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	led := ledger.New(rdb)
	ld := loader.New(led, queue.New(rdb), vault.Ephemeral(), log)
	e := EveryState{File: "payouts-2026-12-01-every-state-of-the-machine.csv", ByState: map[lifecycle.State][]string{}}
	// Every row pays its own card, so that only the held rows, each over
	// the limit on its own, are over their recipient's velocity limit.
	payDay := time.Now().UTC().AddDate(0, 0, 7).Format(time.DateOnly)
	var b strings.Builder
	// Recipient, contact and notes: the informational columns a file
	// carries, shown beside each payout; payDate schedules a row.
	b.WriteString("externalId,amount,cardNumber,recipient,contact,notes,payDate\n")
	recipients := []string{"Anna-Maria Kowalska-Schmidt", "Jean-Baptiste Delacroix", "Oluwaseun Adebayo-Okonkwo"}
	type row struct {
		ext string
		to  lifecycle.State
	}
	var rows []row
	for i, s := range lifecycle.Machine {
		for j := range 3 {
			n := len(rows) + 1
			ext := fmt.Sprintf("INV-2026-12-%04d", n)
			// Amounts up to millions, the batch's total in the tens of
			// millions: wide figures in every column.
			millions, pay := 1+(i*3+j)*331%4000, ""
			switch s.State {
			case lifecycle.Held:
				millions = 7000 + n
			case lifecycle.Scheduled:
				pay = payDay
			}
			fmt.Fprintf(&b, "%s,%d%03d.%02d,%s,%s,+7 912 345-%02d-%02d,%q,%s\n", ext, millions, n*137%1000, n*37%100, testCard(n),
				recipients[j], n, n*3%100, "November bonus and December travel expenses, HR ticket 44"+fmt.Sprint(n), pay)
			rows = append(rows, row{ext, s.State})
		}
	}
	p := filepath.Join(t.TempDir(), e.File)
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	limit, err := money.ParseStored("5000000.00")
	if err != nil {
		t.Fatal(err)
	}
	res, err := ld.LoadFile(ctx, p, loader.Options{
		Approval: loader.Approval{By: "finance-bot"},
		File:     payfile.Options{PayDateColumn: "payDate"},
		Velocity: loader.Velocity{Limits: ledger.VelocityLimits{Amount: limit}, Action: loader.VelocityHold},
	})
	if err != nil || !res.Loaded {
		t.Fatalf("every-state load: %+v %v", res, err)
	}
	e.Batch, e.Rows = res.Batch, len(rows)
	for i, r := range rows {
		e.ByState[r.to] = append(e.ByState[r.to], r.ext)
		switch r.to {
		case lifecycle.Queued, lifecycle.Held, lifecycle.Scheduled:
			// left queued, or held and scheduled by the load itself
		default:
			drive(t, led, e.Batch, r.ext, string(r.to), everyStateReasons[r.to], fmt.Sprintf("PSP-%06d", 800100+i))
		}
		if p, _ := led.Get(ctx, e.Batch, r.ext); p.State != r.to {
			t.Fatalf("every-state: %s is %s, want %s", r.ext, p.State, r.to)
		}
	}
	return e
}
