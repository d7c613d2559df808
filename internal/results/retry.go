package results

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/acme/payout/internal/card"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/payfile"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/report"
	"github.com/acme/payout/internal/view"
)

// The retry file (payout report --failed-only, the UI's download) holds
// the failed payouts of a batch as a payout file that finance corrects and
// drops again: the columns payfile reads (externalId, amount, cardNumber,
// telecomOperator, then the extra properties the rows carry), the reason
// each failed (column reason, which payfile reads and ignores), amounts
// plain with the batch's decimals, and a new externalId per row (RetryID).
//
// A payout the PSP failed for good is left out unless asked
// (RetryOptions.IncludeFinal): see FinalFailure.

// Opener opens the sealed card numbers of the ledger (a *vault.Keyring).
type Opener interface {
	Open(sealed, additionalData string) (string, error)
}

// RetryOptions say how WriteRetry writes.
type RetryOptions struct {
	// Keys open the card numbers, for a file to load again. Nil: the card
	// numbers are written masked (411111******1111), a file to read (the
	// UI's download) that does not load until they are typed in.
	Keys Opener
	// IncludeFinal also writes the payouts the PSP failed for good
	// (FinalFailure).
	IncludeFinal bool
}

// RetryFile is what WriteRetry wrote.
type RetryFile struct {
	Rows   int
	Total  money.Amount
	Scale  int
	Extras []string // extra property columns written
	// Final counts the failed payouts left out as failed for good, and
	// FinalTotal their amounts (zero with IncludeFinal).
	Final      int
	FinalTotal money.Amount
}

// finalFailures are the PSP's reasons of a failed order that say the
// destination can never receive money: the account or card is gone. A
// retry to it fails again, so the retry file leaves such payouts out
// unless asked. The PSP's reference defines no reason codes
// (docs/psp-api.md): these are the words of the reasons seen (the
// simulator's FailReasons), compared ignoring case. Any other reason, a temporary one
// (recipient limit exceeded, the recipient bank rejected the transfer, a
// card blocked by its issuer, which it may unblock) or one not known, is
// retryable: finance reads the reason in the file and decides.
var finalFailures = []string{"account closed", "card expired"}

// FinalFailure reports whether the reason of a failed payout says the PSP
// refused it for good (finalFailures).
func FinalFailure(reason string) bool {
	r := strings.ToLower(reason)
	for _, f := range finalFailures {
		if strings.Contains(r, f) {
			return true
		}
	}
	return false
}

// retrySuffix matches an externalId that is already a retry: ID-R<n>.
var retrySuffix = regexp.MustCompile(`^(.*)-R([0-9]{1,9})$`)

// RetryID is the externalId of the next try of a payout: ID-R1 for ID, and
// ID-R<n+1> for ID-R<n>.
func RetryID(id string) string {
	if m := retrySuffix.FindStringSubmatch(id); m != nil {
		n, _ := strconv.Atoi(m[2]) // at most 9 digits: never fails
		return m[1] + "-R" + strconv.Itoa(n+1)
	}
	return id + "-R1"
}

// retryCell keeps a spreadsheet from running an extra property or a reason
// as a formula (report.Neutralize, the one neutraliser of every CSV the
// product writes), without touching a phone number ("+7 900 123-45-67"): a
// value made of digits, spaces and "+-()" only is no formula that can
// reach another cell. externalId and telecomOperator never start with a
// formula character (payfile refuses them at load).
func retryCell(v string) string {
	if v != "" && strings.Trim(v, "0123456789 +-()") == "" {
		return v
	}
	return report.Neutralize(v)
}

// extraOrder sorts extra property names: payfile's known ones first, in
// its order, then any other by name.
func extraOrder(names map[string]bool) []string {
	known := append(slices.Clone(payfile.DefaultExtraColumns), payfile.ColBankName)
	var out, other []string
	for _, k := range known {
		if names[k] {
			out = append(out, k)
		}
	}
	for n := range names {
		if !slices.Contains(known, n) {
			other = append(other, n)
		}
	}
	slices.Sort(other)
	return append(out, other...)
}

func extraProps(p ledger.Payout) ([]psp.Property, error) {
	if p.Extra == "" {
		return nil, nil
	}
	var props []psp.Property
	if err := json.Unmarshal([]byte(p.Extra), &props); err != nil {
		return nil, fmt.Errorf("ledger properties of %s: %w", p.ExternalID, err)
	}
	return props, nil
}

// retried tells whether WriteRetry writes payout p.
func (o RetryOptions) retried(p ledger.Payout) bool {
	return p.State == lifecycle.Failed && (o.IncludeFinal || !FinalFailure(p.Error))
}

// WriteRetry writes the failed payouts of a batch to w as a retry file
// (see above). It reads the batch twice: once for the extra columns, once
// to write. With Keys the file holds card numbers in clear: the caller
// writes it where only its reader can read it (payout report writes mode
// 0600).
func WriteRetry(ctx context.Context, l *ledger.Ledger, batch string, w io.Writer, o RetryOptions) (RetryFile, error) {
	b, err := l.Batch(ctx, batch)
	if err != nil {
		return RetryFile{}, err
	}
	res := RetryFile{Total: money.Zero, FinalTotal: money.Zero, Scale: b.Scale}
	extras, err := retryExtras(ctx, l, batch, o)
	if err != nil {
		return res, err
	}
	res.Extras = extras
	cw := csv.NewWriter(w)
	rr := newRetryRecord(batch, b, extras, o)
	if err := cw.Write(rr.header); err != nil {
		return res, fmt.Errorf("write failed rows: %w", err)
	}
	err = view.New(l.Redis()).Each(ctx, batch, func(p ledger.Payout) error {
		if p.State != lifecycle.Failed {
			return nil
		}
		amount, err := money.Parse(p.Amount, 18)
		if err != nil {
			return fmt.Errorf("payout %s: ledger amount %q: %w", p.ExternalID, p.Amount, err)
		}
		if !o.retried(p) {
			res.Final++
			res.FinalTotal = res.FinalTotal.Add(amount)
			return nil
		}
		if err := rr.fill(p, amount); err != nil {
			return err
		}
		if err := cw.Write(rr.rec); err != nil {
			return fmt.Errorf("write failed rows: %w", err)
		}
		res.Rows++
		res.Total = res.Total.Add(amount)
		return nil
	})
	if err != nil {
		return res, err
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return res, fmt.Errorf("write failed rows: %w", err)
	}
	return res, nil
}

// retryExtras reads the batch once for the extra properties of the
// payouts WriteRetry writes, and returns their columns in order.
func retryExtras(ctx context.Context, l *ledger.Ledger, batch string, o RetryOptions) ([]string, error) {
	names := map[string]bool{}
	err := view.New(l.Redis()).Each(ctx, batch, func(p ledger.Payout) error {
		if !o.retried(p) {
			return nil
		}
		props, err := extraProps(p)
		for _, pr := range props {
			names[pr.Key] = true
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return extraOrder(names), nil
}

// retryRecord is the header of a retry file and the record of its row
// being written.
type retryRecord struct {
	batch  string
	b      ledger.Batch
	o      RetryOptions
	extras []string
	infoAt int // the first informational column
	header []string
	rec    []string
}

// newRetryRecord makes the header: the columns of a payout file, the
// extra properties, the informational columns, the reason.
func newRetryRecord(batch string, b ledger.Batch, extras []string, o RetryOptions) *retryRecord {
	header := append([]string{payfile.ColExternalID, payfile.ColAmount, payfile.ColCardNumber, payfile.ColTelecomOperator}, extras...)
	// The file's informational columns, as loaded, after the properties;
	// the reason last.
	infoAt := len(header)
	header = append(header, b.InfoColumns...)
	header = append(header, payfile.ColReason)
	// The names of the extra and informational columns come from the
	// file: a name such as =HYPERLINK(...&C2) would carry the clear card
	// number of its row.
	for i, h := range header {
		header[i] = report.Neutralize(h)
	}
	return &retryRecord{batch: batch, b: b, o: o, extras: extras, infoAt: infoAt, header: header, rec: make([]string, len(header))}
}

// fill sets r.rec to the row of payout p, of amount.
func (r *retryRecord) fill(p ledger.Payout, amount money.Amount) error {
	rec := r.rec
	clear(rec)
	rec[0], rec[1] = RetryID(p.ExternalID), amount.Fixed(r.b.Scale)
	if err := r.destination(p); err != nil {
		return err
	}
	props, err := extraProps(p)
	if err != nil {
		return err
	}
	for _, pr := range props {
		rec[4+slices.Index(r.extras, pr.Key)] = retryCell(pr.Value)
	}
	for i, v := range ledger.UnpackInfo(p.Info) {
		if i < len(r.b.InfoColumns) {
			rec[r.infoAt+i] = retryCell(v)
		}
	}
	rec[len(rec)-1] = retryCell(card.Scrub(p.Error))
	return nil
}

// destination sets the card number (opened with the keys, else masked) or
// the telecom operator of payout p.
func (r *retryRecord) destination(p ledger.Payout) error {
	switch {
	case p.Sealed != "" && r.o.Keys != nil:
		pan, err := r.o.Keys.Open(p.Sealed, ledger.SealAD(r.batch, p.ExternalID))
		if err != nil {
			return fmt.Errorf("card number of payout %s: %w", p.ExternalID, err)
		}
		r.rec[2] = pan
	case p.Sealed != "":
		r.rec[2] = card.Scrub(strings.TrimPrefix(p.Destination, "card "))
	case p.Telecom != "":
		r.rec[3] = p.Telecom
	default:
		return fmt.Errorf("payout %s has no destination in the ledger", p.ExternalID)
	}
	return nil
}
