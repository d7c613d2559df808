package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/payfile"
	"github.com/acme/payout/internal/results"
	"github.com/acme/payout/internal/vault"
	"github.com/acme/payout/internal/view"
)

// `payout report --failed-only BATCH` writes the failed payouts of a batch
// as a payout file that finance corrects and drops again
// (results.WriteRetry): the card numbers in clear (opened with the data
// key), the reason each failed, a new externalId per row, and without the
// payouts the PSP failed for good unless --include-final. The file is
// created with mode 0600.

// opener opens the sealed card numbers of the ledger (a *vault.Keyring).
type opener = results.Opener

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
func runReportFailed(ctx context.Context, e *env, l *ledger.Ledger, batch string, keys opener, out string, force, includeFinal bool) error {
	b, err := l.Batch(ctx, batch)
	if err != nil {
		return infraErr(err)
	}
	c, err := view.New(l.Redis()).Counts(ctx, batch)
	if err != nil {
		return infraErr(err)
	}
	if c.Rows[lifecycle.Failed] == 0 {
		fmt.Fprintf(e.stdout, "batch %s has no failed payouts; no file written\n", batch)
		return nil
	}
	if out == "" {
		out = failedFileName(b)
	}
	o := results.RetryOptions{Keys: keys, IncludeFinal: includeFinal}
	if !includeFinal {
		// Nothing to write when every failed payout failed for good.
		var discard countWriter
		res, err := results.WriteRetry(ctx, l, batch, &discard, o)
		if err != nil {
			return retryErr(batch, err)
		}
		if res.Rows == 0 {
			fmt.Fprintf(e.stdout, "batch %s: its %d failed %s failed for good (%s, total %s); no file written (give --include-final to write them)\n",
				batch, res.Final, plural(res.Final, "payout", "payouts"), finalReasons(), res.FinalTotal.Fixed(res.Scale))
			return nil
		}
	}
	var res results.RetryFile
	err = createPrivate(out, force, func(w io.Writer) error {
		var err error
		res, err = results.WriteRetry(ctx, l, batch, w, o)
		return err
	})
	if err != nil {
		return retryErr(batch, err)
	}
	fmt.Fprintf(e.stdout, "%s: %d failed %s, total %s, new externalIds ending -R<n>, the reason in column reason (mode 0600: it holds card numbers; delete it once loaded)\n",
		out, res.Rows, plural(res.Rows, "payout", "payouts"), res.Total.Fixed(res.Scale))
	if res.Final > 0 {
		fmt.Fprintf(e.stdout, "%d %s failed for good left out (%s, total %s): give --include-final to write them\n",
			res.Final, plural(res.Final, "payout", "payouts"), finalReasons(), res.FinalTotal.Fixed(res.Scale))
	}
	return checkFailedFile(ctx, e, out, res)
}

func finalReasons() string { return "account closed, card expired" }

// retryErr classifies an error of WriteRetry.
func retryErr(batch string, err error) error {
	switch {
	case errors.Is(err, errFileExists):
		return usageErr("--out %v", err)
	case errors.Is(err, vault.ErrUnknownKey), errors.Is(err, vault.ErrDecrypt), errors.Is(err, vault.ErrPlaintextRefused), errors.Is(err, vault.ErrBadKey):
		return configErr(fmt.Errorf("the data key does not open the card numbers of batch %s: %w", batch, err))
	}
	return infraErr(err)
}

// countWriter discards what is written.
type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}

// checkFailedFile reads the written file back with the loader's checker:
// a problem (an externalId grown past the length limit, say) is printed
// for finance to correct, and the command exits 1.
func checkFailedFile(ctx context.Context, e *env, path string, res results.RetryFile) error {
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
