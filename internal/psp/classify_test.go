package psp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/acme/payout/internal/psp"
)

const createdBody = `{"amount":"10.50","status":"Created","externalId":"EXT-1","pspDepositOrderID":"WD-0a1b2c3d-0000-4000-8000-000000000001"}`

func TestClassifyTable(t *testing.T) {
	dialErr := &url.Error{Op: "Post", URL: "http://127.0.0.1:1/x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}}
	resetErr := &url.Error{Op: "Post", URL: "http://127.0.0.1:1/x", Err: &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}}
	timeout := &url.Error{Op: "Post", URL: "http://x/y", Err: context.DeadlineExceeded}
	create, status, deposit := psp.OpWithdrawalCreate, psp.OpWithdrawalStatus, psp.OpDepositCreate
	for _, tc := range []struct {
		op     psp.Operation
		status int
		body   string
		err    error
		sent   bool
		want   psp.Outcome
		msg    string
	}{
		{create, 200, createdBody, nil, true, psp.Created, ""},
		{create, 200, `{"pspDepositOrderId":12345,"externalId":"E"}`, nil, true, psp.Created, ""},
		{create, 200, `{"externalId":"E","status":"Created"}`, nil, true, psp.Ambiguous, "without a usable order id"},
		{create, 200, `<html>`, nil, true, psp.Ambiguous, "unparsable"},
		{create, 200, `null`, nil, true, psp.Ambiguous, "without a usable order id"},
		{create, 200, `[1]`, nil, true, psp.Ambiguous, "unparsable"},
		{create, 200, createdBody[:40], io.ErrUnexpectedEOF, true, psp.Ambiguous, "body unreadable"},
		{create, 400, `{"message":"amount invalid"}`, nil, true, psp.Rejected, "HTTP 400: amount invalid"},
		{create, 422, `{"title":"Unprocessable","errors":{"card":["declined"]}}`, nil, true, psp.Rejected, "Unprocessable"},
		{create, 422, `{"errors":{"card":["declined"]}}`, nil, true, psp.Rejected, `{"card":["declined"]}`},
		{create, 422, ``, nil, true, psp.Rejected, "Unprocessable Entity"},
		{create, 401, ``, nil, true, psp.AuthFault, "401"},
		{create, 403, ``, nil, true, psp.AuthFault, "403"},
		{create, 404, ``, nil, true, psp.AuthFault, "wrong base URL"},
		{create, 405, ``, nil, true, psp.AuthFault, "wrong base URL"},
		{create, 429, ``, nil, true, psp.RetryLater, "429"},
		{create, 423, ``, nil, true, psp.Ambiguous, "423"},
		{create, 499, ``, nil, true, psp.Ambiguous, ""},
		{create, 500, `oops`, nil, true, psp.Ambiguous, "HTTP 500: oops"},
		{create, 504, ``, nil, true, psp.Ambiguous, ""},
		{create, 302, ``, nil, true, psp.Ambiguous, ""},
		{create, 201, createdBody, nil, true, psp.Ambiguous, ""},
		{create, 409, ``, nil, true, psp.Ambiguous, ""},
		{create, 0, ``, dialErr, false, psp.RetryLater, "request not sent: dial"},
		{create, 0, ``, resetErr, true, psp.Ambiguous, "after the request was sent"},
		{create, 0, ``, timeout, true, psp.Ambiguous, "timeout"},
		{create, 0, ``, timeout, false, psp.RetryLater, "timeout"},
		{create, 0, ``, nil, true, psp.Ambiguous, ""},
		{deposit, 200, `{"externalId":"D1","orderStatus":"Processing","paymentDetails":{"amount":"1","formUrl":"https://x/f"}}`, nil, true, psp.Created, ""},
		{deposit, 200, `{"orderStatus":"Processing"}`, nil, true, psp.Ambiguous, ""},
		{deposit, 422, ``, nil, true, psp.Rejected, ""},
		{deposit, 404, ``, nil, true, psp.AuthFault, ""},
		{deposit, 423, ``, nil, true, psp.Ambiguous, ""},
		{status, 200, createdBody, nil, true, psp.Created, ""},
		{status, 200, `{"externalId":"E","status":"Paid"}`, nil, true, psp.Ambiguous, "without a usable order id"},
		{status, 200, `{"pspDepositOrderID":"","externalId":"E"}`, nil, true, psp.Ambiguous, "not proof"},
		{status, 200, `{}`, nil, true, psp.Ambiguous, ""},
		{status, 200, `garbage`, nil, true, psp.Ambiguous, ""},
		{status, 404, ``, nil, true, psp.NotFound, ""},
		{status, 401, ``, nil, true, psp.AuthFault, ""},
		{status, 403, ``, nil, true, psp.AuthFault, ""},
		{status, 429, ``, nil, true, psp.RetryLater, ""},
		{status, 400, ``, nil, true, psp.Ambiguous, ""},
		{status, 405, ``, nil, true, psp.Ambiguous, ""},
		{status, 500, ``, nil, true, psp.Ambiguous, ""},
		{status, 0, ``, timeout, true, psp.Ambiguous, ""},
		{status, 0, ``, dialErr, false, psp.RetryLater, ""},
		{"other", 200, createdBody, nil, true, psp.Ambiguous, ""},
	} {
		name := fmt.Sprintf("%s/%d/%.20s", tc.op, tc.status, tc.body)
		r := psp.Classify(tc.op, tc.status, nil, []byte(tc.body), tc.err, tc.sent)
		if r.Outcome != tc.want {
			t.Errorf("%s: outcome %v (%q), want %v", name, r.Outcome, r.Message, tc.want)
		}
		if !strings.Contains(r.Message, tc.msg) {
			t.Errorf("%s: message %q lacks %q", name, r.Message, tc.msg)
		}
		if r.Op != tc.op || r.HTTPStatus != tc.status {
			t.Errorf("%s: op/status %q %d", name, r.Op, r.HTTPStatus)
		}
		if strings.Contains(r.Message, "http://") {
			t.Errorf("%s: message carries the URL: %q", name, r.Message)
		}
	}
}

func TestClassifyCreatedOrder(t *testing.T) {
	r := psp.Classify(psp.OpWithdrawalCreate, 200, nil, []byte(createdBody), nil, true)
	want := psp.Order{OrderID: "WD-0a1b2c3d-0000-4000-8000-000000000001", ExternalID: "EXT-1", Amount: "10.50", Status: "Created"}
	if r.Order != want {
		t.Errorf("order %+v", r.Order)
	}
	// A UUID-like id may hold a long run of digits: it must stay exact.
	r = psp.Classify(psp.OpWithdrawalStatus, 200, nil, []byte(`{"pspDepositOrderID":"WD-12345678-1234-4123-8123-123456789012"}`), nil, true)
	if r.Outcome != psp.Created || r.Order.OrderID != "WD-12345678-1234-4123-8123-123456789012" {
		t.Errorf("digit-heavy id altered: %+v", r.Order)
	}
	for _, bad := range []string{`{"pspDepositOrderID":"WD-1\u0000"}`, `{"pspDepositOrderID":"` + strings.Repeat("x", psp.MaxIDLen+1) + `"}`} {
		if r := psp.Classify(psp.OpWithdrawalCreate, 200, nil, []byte(bad), nil, true); r.Outcome != psp.Ambiguous {
			t.Errorf("malformed id accepted: %+v", r.Order)
		}
	}
	r = psp.Classify(psp.OpWithdrawalCreate, 200, nil, []byte(`{"pspDepositOrderID":"WD-1","amount":10.50,"extra":{"x":[1]}}`), nil, true)
	if r.Outcome != psp.Created || r.Order.Amount != "10.50" {
		t.Errorf("numeric amount: %+v", r)
	}
}

func TestClassifyRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		header   string
		min, max time.Duration
	}{
		{"", 0, 0},
		{"2", 2 * time.Second, 2 * time.Second},
		{" 120 ", 2 * time.Minute, 2 * time.Minute},
		{"-3", 0, 0},
		{"soon", 0, 0},
		{time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat), 28 * time.Second, 31 * time.Second},
		{time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat), 0, 0},
		{"999999999", 24 * time.Hour, 24 * time.Hour},
	} {
		for _, op := range []psp.Operation{psp.OpWithdrawalCreate, psp.OpWithdrawalStatus} {
			r := psp.Classify(op, 429, http.Header{"Retry-After": {tc.header}}, nil, nil, true)
			if r.Outcome != psp.RetryLater || r.RetryAfter < tc.min || r.RetryAfter > tc.max {
				t.Errorf("%s Retry-After %q: %v %v, want [%v,%v]", op, tc.header, r.Outcome, r.RetryAfter, tc.min, tc.max)
			}
		}
	}
}

func TestClassifyMessageScrubbedAndBounded(t *testing.T) {
	long := strings.Repeat("é", 400) + " 4111111111111111"
	for _, body := range []string{
		`{"message":"card 4111111111111111 declined"}`,
		`{"message":"card 4111 1111 1111 1111 declined"}`,
		`{"message":"card 4111\n1111\t1111 1111 declined"}`,
		`{"message":"card \u0034111111111111111 declined"}`,
		"card 4111111111111111 declined\x00\x01",
		long,
		`{"message":"` + long + `"}`,
	} {
		r := psp.Classify(psp.OpWithdrawalCreate, 422, nil, []byte(body), nil, true)
		if strings.Contains(strings.NewReplacer(" ", "", "\n", "", "\t", "").Replace(r.Message), "4111111111111111") {
			t.Errorf("message leaks the card: %q", r.Message)
		}
		if len(r.Message) > psp.MaxMessageLen || !utf8.ValidString(r.Message) {
			t.Errorf("message not bounded or invalid: %d bytes", len(r.Message))
		}
	}
}

// longestDigitRun is the length of the longest run of ASCII digits in s.
func longestDigitRun(s string) int {
	best, cur := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			cur++
			best = max(best, cur)
		} else {
			cur = 0
		}
	}
	return best
}

func FuzzClassify(f *testing.F) {
	f.Add(uint8(0), 200, []byte(createdBody), "", false, true)
	f.Add(uint8(0), 200, []byte(`{"pspDepositOrderID":"4111111111111111"}`), "", false, true)
	f.Add(uint8(0), 200, []byte(`{"pspDepositOrderID":null}`), "", false, true)
	f.Add(uint8(1), 200, []byte(`{"externalId":"E"}`), "", false, true)
	f.Add(uint8(2), 200, []byte(`{"externalId":"D","paymentDetails":{"formUrl":1}}`), "", false, true)
	f.Add(uint8(0), 422, []byte(`{"message":"card 4111 1111 1111 1111 declined"}`), "", false, true)
	f.Add(uint8(0), 400, []byte("\xff\xfe 5500-0000-0000-0004"), "", false, true)
	f.Add(uint8(0), 429, []byte(nil), "Wed, 21 Oct 2015 07:28:00 GMT", false, true)
	f.Add(uint8(1), 429, []byte(nil), "17", false, true)
	f.Add(uint8(0), 0, []byte(nil), "", true, false)
	f.Add(uint8(0), 0, []byte(nil), "", true, true)
	f.Add(uint8(1), 404, []byte(`{"errors":[{"detail":"x"}]}`), "", false, true)
	f.Add(uint8(0), 503, []byte(strings.Repeat("9", 2000)), "", false, true)
	ops := []psp.Operation{psp.OpWithdrawalCreate, psp.OpWithdrawalStatus, psp.OpDepositCreate}
	f.Fuzz(func(t *testing.T, opIdx uint8, status int, body []byte, retryAfter string, withErr, sent bool) {
		op := ops[int(opIdx)%len(ops)]
		if status < 0 || status > 999 {
			status = 0
		}
		var err error
		if withErr {
			err = io.ErrUnexpectedEOF
		}
		r := psp.Classify(op, status, http.Header{"Retry-After": {retryAfter}}, body, err, sent)
		if r.Outcome < psp.Created || r.Outcome > psp.NotFound {
			t.Fatalf("outcome %d", r.Outcome)
		}
		if r.Outcome == psp.Created {
			if status != 200 || err != nil {
				t.Fatalf("created from status %d err %v", status, err)
			}
			if r.Order.OrderID == "" {
				t.Fatalf("created without an id: %+v", r.Order)
			}
		}
		if status == 0 {
			want := psp.RetryLater
			if sent {
				want = psp.Ambiguous
			}
			if r.Outcome != want || r.Sent != sent {
				t.Fatalf("no response, sent=%v: %v", sent, r.Outcome)
			}
		} else if !r.Sent {
			t.Fatalf("a response but Sent=false")
		}
		if r.Outcome == psp.NotFound && (op != psp.OpWithdrawalStatus || status != 404) {
			t.Fatalf("not found from %s %d", op, status)
		}
		if r.Outcome == psp.Rejected && (op == psp.OpWithdrawalStatus || (status != 400 && status != 422)) {
			t.Fatalf("rejected from %s %d", op, status)
		}
		if r.RetryAfter < 0 || (r.RetryAfter > 0 && status != 429) {
			t.Fatalf("retry-after %v on %d", r.RetryAfter, status)
		}
		texts := []string{r.Message, r.Order.Status}
		if m := r.Mismatch; m != nil {
			if r.Outcome != psp.Ambiguous || status != 200 {
				t.Fatalf("mismatch on %v %d", r.Outcome, status)
			}
			texts = append(texts, m.FoundExternalID, m.FoundOrderID, m.FoundAmount)
		}
		for _, s := range texts {
			if longestDigitRun(s) >= 12 {
				t.Fatalf("unscrubbed digits: %q", s)
			}
			if len(s) > psp.MaxMessageLen || !utf8.ValidString(s) {
				t.Fatalf("unbounded or invalid text: %q", s)
			}
		}
		// Identifiers are kept exact but clean and bounded.
		for _, s := range []string{r.Order.OrderID, r.Order.ExternalID, r.Order.Amount} {
			if len(s) > psp.MaxIDLen || !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f }) {
				t.Fatalf("unclean identifier: %q", s)
			}
		}
	})
}

func BenchmarkClassify(b *testing.B) {
	for _, bc := range []struct {
		name   string
		status int
		body   []byte
	}{
		{"created", 200, []byte(createdBody)},
		{"rejected", 422, []byte(`{"status":422,"title":"Unprocessable Entity","message":"card 400000******0002 declined"}`)},
		{"ambiguous", 503, []byte(`{"status":503,"message":"service unavailable"}`)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				psp.Classify(psp.OpWithdrawalCreate, bc.status, nil, bc.body, nil, true)
			}
		})
	}
}
