// Package report writes what finance gets back for a payout file: the result
// file of a batch (CSV, XLSX or JSON), its summary file, the error listing
// of a refused file, and a summary table for the terminal.
//
// It is the pure half of the results (package results is the bridge from
// the ledger that reads a batch and hands its rows here): it reads no
// Redis, no ledger record and no queue, and from the ledger it takes only
// the state machine (the state names, which are final, which are open). It
// takes rows (in line order, from an iterator so that a 1,000,000-row batch
// is streamed and only the per-state totals are kept in memory) and writes
// files: [Write] in the format asked for, [WriteFiles] to a path, complete
// or not at all, with its summary file beside it. Rows that are
// out of order or repeat a line are refused with an [OrderError]: a line
// reported twice would hide a duplicate payout. An error from the row source
// stops the writer and is returned wrapped. On any error the output is
// incomplete: write to a temporary file and rename it only when the writer
// returned nil.
//
// # States and summary
//
// Every row is in one of the ledger states. [Summarize] (and every writer)
// totals rows and amounts per state, always listing the known states in
// the fixed order [lifecycle.States] (paid, failed, created, rejected, needs_review,
// cancelled, checking, submitting, queued), with zero rows when none is in
// a state, followed by any unknown state found (sorted by name), so that a
// reader sees the full picture, and the created rows still awaiting their
// outcome ([Row.Awaiting]). Amounts are summed exactly ([money.Amount],
// never float64). A summary is final when every row is in a final state
// (paid, failed, created, rejected, needs_review, cancelled) and no created
// row awaits its outcome.
//
// # Outcome groups
//
// Every row is also in exactly one outcome group ([GroupOf]), what finance
// reads:
//
//   - paid: the PSP reported the money sent (state paid).
//   - failed: the PSP failed the order; it will not be paid (state failed;
//     pspStatus holds the PSP's word, error the reason).
//   - pending: the workers are still on it: queued, submitting, checking,
//     and created rows awaiting their outcome.
//   - not_sent: no money left and none will without a new file: rejected,
//     cancelled, and needs_review rows without a PSP order whose error
//     proves nothing reached the PSP (create retries used up, absence
//     confirmed after the last create, request never built).
//   - unknown: the money may have left; ask the PSP: needs_review rows with
//     a PSP order id (the outcome window ended) or whose status checks never
//     got an answer, created rows whose outcome is not followed
//     (--track-outcome=false), and rows in an unknown state.
//
// A summary is reconciled when the number of rows equals the file's row
// count and both the sum of the states and the sum of the five groups
// equal the file's total as loaded, exactly.
//
// # Result CSV layout
//
// The first line is the header
//
//	line,externalId,amount,destination,state,pspOrderId,pspStatus,attempts,error,updatedAt,resolvedBy,resolutionNote,outcome
//
// then one line per row, in line order. state is the ledger state, pspStatus
// the PSP's last status word, error the failure or review reason, and
// outcome the row's outcome group (a created row is pending while it awaits
// its outcome, unknown when its outcome is not followed). Amounts are written exactly with the
// batch's Scale decimal places ("10.50"); an amount with more decimals than
// Scale is written with all its decimals, never rounded. updatedAt is RFC 3339
// in UTC to the second ("2026-01-02T03:04:05Z"), empty when unknown.
// resolvedBy and resolutionNote name the operator who resolved a payout out
// of needs_review (`payout resolve`) and the note they gave; both are empty
// for a payout nobody resolved. Lines end with LF; no byte order mark is
// written. Nothing follows the rows ([WriteCSV]): the file is one clean
// table.
//
// # Summary file
//
// The summary of a CSV result goes to a text file beside it
// ([SummaryPath]: NAME.summary.txt), written by [WriteSummary]: the batch,
// then the table of [WriteSummaryText].
//
// # XLSX result
//
// [WriteXLSX] writes a workbook: a Payouts sheet with the columns of the
// CSV and a Summary sheet with the lines of the trailer below as a table.
// Amounts are number cells with the batch's decimals when a spreadsheet
// shows them exactly (at most 14 significant digits), else text.
//
// # Trailer (the old layout)
//
// With [CSVOptions.SummaryInCSV] the rows are followed by a blank line and
// a trailer, the layout before the summary file. Every trailer line starts
// with a cell "# name" (a program that wants only the rows stops at the blank
// line or drops records whose first cell starts with '#'; a data line's
// first cell is always a number), and every trailer line is padded with
// empty cells to the header's 13 columns, so the whole file is one
// rectangular table that encoding/csv's default Reader and any spreadsheet
// read without options:
//
//	# batch,id,file,loadedAt,final,,,,,,,,
//	# batch,<batch id>,<file>,<loadedAt>,yes|no,,,,,,,,
//	# summary,state,rows,amount,,,,,,,,,
//	# summary,paid,<rows>,<amount>,,,,,,,,,
//	... one line per state, in the order above ...
//	# summary,total,<rows>,<amount>,,,,,,,,,
//	# summary,created awaiting outcome,<rows>,<amount>,,,,,,,,,
//	# outcome,group,rows,amount,meaning,,,,,,,,
//	# outcome,paid,<rows>,<amount>,<meaning>,,,,,,,,
//	... one line per group: paid, failed, pending, not_sent, unknown ...
//	# outcome,total,<rows>,<amount>,,,,,,,,,
//	# reconciliation,total of states,<amount>,file total,<amount>,rows,<n>,file rows,<n>,OK|MISMATCH,,,
//
// # CSV injection
//
// A spreadsheet may run a cell that starts with a formula character. Every
// cell written to a CSV file (rows, trailer and error listings alike) whose
// first character is '=', '+', '-', '@', a tab or a carriage return is
// prefixed with a single quote ('), as OWASP recommends; the spreadsheet shows
// the quote and the text as typed. Nothing else in a cell is changed: no
// trimming, no character removed; quotes, commas and newlines are quoted by
// the CSV rules, so the original value is the cell without that one leading
// quote. Amounts are positive and never start with a dangerous character.
// The XLSX result file's text cells and headers go through the same
// function: a text cell is no formula while the workbook is as written,
// but becomes one when edited or saved as CSV. The JSON output is for
// programs and is not neutralised.
//
// # Card numbers
//
// Destinations are expected masked already. As a last line of defence the
// destination, error, resolvedBy and resolutionNote cells of every output,
// and the message of an error listing, go through [card.Scrub], which masks
// any run of 12 to 19 digits (an operator may paste a card number into a
// note).
// Other cells (externalId, PSP order id) are identifiers that finance must
// match exactly and are written unchanged.
package report
