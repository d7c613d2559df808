package cli

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/payfile"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/vault"
)

// `payout report --failed-only BATCH` writes the failed payouts of a batch
// as a payout file that finance corrects and drops again: the columns
// payfile reads (externalId, amount, cardNumber, telecomOperator, then the
// extra properties the rows carry), the card numbers in clear (opened with
// the data key), amounts plain with the batch's decimals, and a new
// externalId per row (retryID). The file is created with mode 0600.

// opener opens the sealed card numbers of the ledger (a *vault.Keyring).
type opener interface {
	Open(sealed, additionalData string) (string, error)
}

// retrySuffix matches an externalId that is already a retry: ID-R<n>.
var retrySuffix = regexp.MustCompile(`^(.*)-R([0-9]{1,9})$`)

// retryID is the externalId of the next try of a payout: ID-R1 for ID, and
// ID-R<n+1> for ID-R<n>.
func retryID(id string) string {
	if m := retrySuffix.FindStringSubmatch(id); m != nil {
		n, _ := strconv.Atoi(m[2]) // at most 9 digits: never fails
		return m[1] + "-R" + strconv.Itoa(n+1)
	}
	return id + "-R1"
}

// retryCell keeps a spreadsheet from running an extra property as a
// formula, without touching a phone number ("+7 900 123-45-67"): a value
// that starts with a formula character and is not made of digits, spaces
// and "+-()" gets a leading quote. externalId and telecomOperator never
// start with one (payfile refuses them at load).
func retryCell(v string) string {
	if v == "" || !strings.ContainsRune("=+-@\t\r", rune(v[0])) {
		return v
	}
	if strings.Trim(v, "0123456789 +-()") == "" {
		return v
	}
	return "'" + v
}

// failedFile is what writeFailed wrote.
type failedFile struct {
	Rows   int
	Total  money.Amount
	Scale  int
	Extras []string // extra property columns written
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

// writeFailed writes the failed payouts of batch to w in payout-file form.
// It reads the batch twice: once for the extra columns, once to write.
func writeFailed(ctx context.Context, l *ledger.Ledger, batch string, keys opener, w io.Writer) (failedFile, error) {
	b, err := l.Batch(ctx, batch)
	if err != nil {
		return failedFile{}, err
	}
	res := failedFile{Total: money.Zero, Scale: b.Scale}
	names := map[string]bool{}
	err = l.Each(ctx, batch, func(p ledger.Payout) error {
		if p.State != ledger.Failed {
			return nil
		}
		props, err := extraProps(p)
		for _, pr := range props {
			names[pr.Key] = true
		}
		return err
	})
	if err != nil {
		return res, err
	}
	extras := extraOrder(names)
	res.Extras = extras
	cw := csv.NewWriter(w)
	header := append([]string{payfile.ColExternalID, payfile.ColAmount, payfile.ColCardNumber, payfile.ColTelecomOperator}, extras...)
	// The file's informational columns, as loaded, after the properties.
	infoAt := len(header)
	header = append(header, b.InfoColumns...)
	if err := cw.Write(header); err != nil {
		return res, fmt.Errorf("write failed rows: %w", err)
	}
	rec := make([]string, len(header))
	err = l.Each(ctx, batch, func(p ledger.Payout) error {
		if p.State != ledger.Failed {
			return nil
		}
		amount, err := money.Parse(p.Amount, 18)
		if err != nil {
			return fmt.Errorf("payout %s: ledger amount %q: %w", p.ExternalID, p.Amount, err)
		}
		clear(rec)
		rec[0], rec[1] = retryID(p.ExternalID), amount.StringFixed(b.Scale)
		switch {
		case p.Sealed != "":
			pan, err := keys.Open(p.Sealed, ledger.SealAD(batch, p.ExternalID))
			if err != nil {
				return fmt.Errorf("card number of payout %s: %w", p.ExternalID, err)
			}
			rec[2] = pan
		case p.Telecom != "":
			rec[3] = p.Telecom
		default:
			return fmt.Errorf("payout %s has no destination in the ledger", p.ExternalID)
		}
		props, err := extraProps(p)
		if err != nil {
			return err
		}
		for _, pr := range props {
			rec[4+slices.Index(extras, pr.Key)] = retryCell(pr.Value)
		}
		for i, v := range ledger.UnpackInfo(p.Info) {
			if infoAt+i < len(rec) {
				rec[infoAt+i] = retryCell(v)
			}
		}
		if err := cw.Write(rec); err != nil {
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

// failedFileName is the default output of --failed-only: the loaded file's
// base name with .failed.csv, in the current directory.
func failedFileName(b ledger.Batch) string {
	base := filepath.Base(b.File)
	if base == "." || base == string(filepath.Separator) || base == "" {
		base = b.ID
	}
	return strings.TrimSuffix(base, filepath.Ext(base)) + ".failed.csv"
}

// errFileExists: the output exists and --force was not given.
var errFileExists = errors.New("exists (give --force to replace it)")

// createPrivate creates path with mode 0600 and calls write on it. Without
// force an existing path is refused; with force it is replaced by a rename
// once the new content is complete. On error nothing is left behind.
func createPrivate(path string, force bool, write func(io.Writer) error) error {
	target := path
	if force {
		target = path + ".tmp"
		_ = os.Remove(target) // a leftover of an interrupted run, ours
	}
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s %w", path, errFileExists)
	}
	if err != nil {
		return err
	}
	// The mode is 0600 whatever the umask (it can only remove bits), but
	// say so explicitly in case the file system ignores open's mode.
	err = f.Chmod(0o600)
	if err == nil {
		err = write(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && force {
		err = os.Rename(target, path)
	}
	if err != nil {
		os.Remove(target)
		return err
	}
	return nil
}

// runReportFailed is `payout report --failed-only`.
func runReportFailed(ctx context.Context, e *env, l *ledger.Ledger, batch string, keys opener, out string, force bool) error {
	b, err := l.Batch(ctx, batch)
	if err != nil {
		return infraErr(err)
	}
	c, err := l.Counts(ctx, batch)
	if err != nil {
		return infraErr(err)
	}
	if c.Rows[ledger.Failed] == 0 {
		fmt.Fprintf(e.stdout, "batch %s has no failed payouts; no file written\n", batch)
		return nil
	}
	if out == "" {
		out = failedFileName(b)
	}
	var res failedFile
	err = createPrivate(out, force, func(w io.Writer) error {
		var err error
		res, err = writeFailed(ctx, l, batch, keys, w)
		return err
	})
	switch {
	case errors.Is(err, errFileExists):
		return usageErr("--out %v", err)
	case errors.Is(err, vault.ErrUnknownKey), errors.Is(err, vault.ErrDecrypt), errors.Is(err, vault.ErrPlaintextRefused), errors.Is(err, vault.ErrBadKey):
		return configErr(fmt.Errorf("the data key does not open the card numbers of batch %s: %w", batch, err))
	case err != nil:
		return infraErr(err)
	}
	fmt.Fprintf(e.stdout, "%s: %d failed %s, total %s, new externalIds ending -R<n> (mode 0600: it holds card numbers; delete it once loaded)\n",
		out, res.Rows, plural(res.Rows, "payout", "payouts"), res.Total.StringFixed(res.Scale))
	return checkFailedFile(ctx, e, out, res)
}

// checkFailedFile reads the written file back with the loader's checker:
// a problem (an externalId grown past the length limit, say) is printed
// for finance to correct, and the command exits 1.
func checkFailedFile(ctx context.Context, e *env, path string, res failedFile) error {
	f, err := os.Open(path)
	if err != nil {
		return infraErr(err)
	}
	defer f.Close()
	// The extra columns the file has were accepted at load.
	opts := payfile.Options{Scale: res.Scale, ExtraColumns: append([]string{}, res.Extras...)}
	if res.Scale == 0 {
		opts.Scale = -1
	}
	sum, errs, err := payfile.Collect(ctx, filepath.Base(path), f, opts)
	if err != nil {
		return infraErr(err)
	}
	for _, pe := range errs {
		fmt.Fprintf(e.stderr, "%s (correct it before loading the file)\n", pe)
	}
	if len(errs) > 0 || sum.ValidRows != res.Rows || sum.Total.Cmp(res.Total) != 0 {
		return errRejected
	}
	return nil
}
