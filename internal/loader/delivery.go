package loader

// The delivery contract: when a file in the spool's inbox/ is complete,
// and what the spool does with one that may not be.
//
// A loader cannot see a writer: a CSV file whose writer stalls right after
// a newline looks exactly like a complete file with fewer rows. So the
// spool takes a file only on a sign from its sender that it is complete,
// chosen by --delivery:
//
//   - DeliveryControl (the default): the file is taken only once its
//     control file NAME.ctl is there. The sender writes NAME.ctl after NAME
//     is complete (an empty NAME.ctl is enough: `touch NAME.ctl`); when it
//     declares size= or sha256= (control.go) the file is taken only when
//     its bytes match, so the order of the two does not matter, and a file
//     shorter than its declared size is held (still arriving).
//   - DeliveryRename: every file that appears under its own name in inbox/
//     is complete: the sender writes it elsewhere on the same filesystem
//     (or under a name the spool ignores: starting with '.', ending .part,
//     .tmp, .partial, .crdownload, .swp or ~) and renames it into place. A
//     sender that writes in place breaks the contract: the checks below
//     catch a stall in the middle of a line, never one at a row boundary.
//
// In both, a file is held (left in inbox/, taken by a later run) while:
// it or its control file changed less than --settle ago (clock: the
// spool's Now); its control file's last line is incomplete; a file of the
// same name is still in processing/; a CSV file's last line does not end
// in a newline (unless its bytes match a declared size or sha256); a bare
// marker (a control file that declares nothing) is older than the file's
// last change (the file changed after its sender said it was complete).
// A file held longer than --held-report is reported: logged as a warning
// at every run, listed in outbox/held.csv and counted in SpoolResult.Held
// (payout load exits 1). A settled workbook that is no complete ZIP
// package is taken and refused (failed/), as any unreadable file.
//
// A file taken is renamed into processing/ (same filesystem: atomic) and
// then checked again: a file whose size or time changed while it was
// taken has a writer still at work and goes back to inbox/, held. Then the
// spool loads its own copy (privatize): processing/NAME becomes a copy of
// the bytes, and the sender's inode stays beside it as .NAME.sent (whose
// owner is who loaded the file, for --four-eyes). A sender that still
// holds the file open can no longer change what is read, between the
// loader's passes or after; what it writes later is not loaded, and is
// reported (a warning of the file, an error in the log) when the file
// moves on. Only the contract rules such a sender out, which is why the
// spool waits for a sign of completion rather than a quiet spell alone.

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/acme/payout/internal/payfile"
	"github.com/acme/payout/internal/report"
	"github.com/rs/zerolog"
)

// Delivery is how senders mark a file in inbox/ as complete.
type Delivery string

// The delivery contracts (see the top of this file).
const (
	DeliveryControl Delivery = "control" // a file is taken once its NAME.ctl is there
	DeliveryRename  Delivery = "rename"  // every file under its own name is complete
)

// ErrDelivery is matched by the error of an unknown delivery contract.
var ErrDelivery = errors.New("unknown delivery contract: want control or rename")

// ParseDelivery reads --delivery ("" is the default, control).
func ParseDelivery(s string) (Delivery, error) {
	switch d := Delivery(strings.ToLower(strings.TrimSpace(s))); d {
	case "":
		return DeliveryControl, nil
	case DeliveryControl, DeliveryRename:
		return d, nil
	}
	return "", fmt.Errorf("%q: %w", s, ErrDelivery)
}

// DefaultHeldReport is how long a file may be held before it is reported.
const DefaultHeldReport = time.Hour

// HeldFile is a file of inbox/ the spool did not take, and why.
type HeldFile struct {
	File    string
	Since   time.Time // its last change (or its control file's, if later)
	Reason  string
	Overdue bool // held longer than SpoolOptions.HeldReport: reported
}

// HeldListing is the outbox file that lists the files held too long.
const HeldListing = "held.csv"

// DeliveryNote is the file, in inbox/, that says which contract the spool
// runs under, for the senders' scripts: its first line is the contract's
// name (control or rename). The spool ignores it, as every name starting
// with '.'.
const DeliveryNote = ".delivery"

// ignored reports whether name in inbox/ is never a payout file: hidden,
// a sender's temporary name, or a control file.
func ignored(name string) bool {
	if strings.HasPrefix(name, ".") || strings.HasSuffix(name, "~") || IsControlFile(name) {
		return true
	}
	switch strings.ToLower(filepath.Ext(name)) {
	case ".part", ".tmp", ".partial", ".crdownload", ".swp", ".filepart":
		return true
	}
	return false
}

// intake is what the spool decides for one file of inbox/.
type intake struct {
	take    bool
	withCtl bool
	held    string    // why it is held ("" when taken)
	since   time.Time // the latest change of the file or its control file
	size    int64     // the file as inspected
	modTime time.Time
}

// inspect decides whether the file name of inbox/ is taken now, under
// delivery d, a settle window and the clock now.
func inspect(dir, name string, o SpoolOptions, d Delivery, now time.Time) (intake, bool) {
	inbox := filepath.Join(dir, Inbox)
	path := filepath.Join(inbox, name)
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return intake{}, false // vanished
	}
	in := intake{since: fi.ModTime(), size: fi.Size(), modTime: fi.ModTime()}
	hold := func(format string, args ...any) (intake, bool) {
		in.held = fmt.Sprintf(format, args...)
		return in, true
	}
	if age := now.Sub(fi.ModTime()); age < o.Settle {
		return hold("still changing: modified %s ago (--settle %s)", age.Round(time.Second), o.Settle)
	}
	if _, err := os.Lstat(filepath.Join(dir, Processing, name)); err == nil {
		return hold("a file of the same name is still in processing/ (a run was interrupted): it is taken once that one is done")
	}
	ctlPath := ControlPath(path)
	ci, err := os.Stat(ctlPath)
	hasCtl := err == nil
	switch {
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return hold("its control file cannot be read: %v", err)
	case hasCtl && ci.ModTime().After(in.since):
		in.since = ci.ModTime()
	}
	var ctl Control
	if hasCtl {
		in.withCtl = true
		c, held, bad := controlReady(ctlPath, name, ci, o, now)
		switch {
		case held != "":
			return hold("%s", held)
		case bad:
			in.take = true // the load refuses it, naming the control file's problems
			return in, true
		}
		ctl = c
	} else if held := awaitingControl(name, fi, o, d, now); held != "" {
		return hold("%s", held)
	}
	if ctl.Size > 0 && fi.Size() < ctl.Size {
		return hold("still arriving: %d of the %d bytes its control file declares", fi.Size(), ctl.Size)
	}
	if ctl.DeclaresBytes() {
		// Its bytes are checked when it is loaded: a match is a complete
		// file, a mismatch refuses it.
		in.take = true
		return in, true
	}
	if hasCtl && !ctl.Declared() && ci.ModTime().Before(fi.ModTime()) {
		return hold("changed after its control file %s was written: write the control file once the file is complete", name+ControlExt)
	}
	if !payfile.IsWorkbook(name) && fi.Size() > 0 && incompleteLastLine(path) {
		return hold("its last line is incomplete (no newline at the end): still being written")
	}
	in.take = true
	return in, true
}

// controlReady reads the control file ci (at ctlPath) of the settled file
// name: held says why the file still waits for it ("": it does not), bad
// that it cannot be read or is wrong (the load refuses the file, naming
// its problems).
func controlReady(ctlPath, name string, ci fs.FileInfo, o SpoolOptions, now time.Time) (ctl Control, held string, bad bool) {
	if age := now.Sub(ci.ModTime()); age < o.Settle {
		return Control{}, fmt.Sprintf("its control file %s is still changing: modified %s ago (--settle %s)", name+ControlExt, age.Round(time.Second), o.Settle), false
	}
	if incompleteLastLine(ctlPath) {
		return Control{}, fmt.Sprintf("the last line of its control file %s is incomplete (no newline at its end)", name+ControlExt), false
	}
	c, _, problems, err := ReadControl(ctlPath, o.Load.File.Scale)
	if err != nil || len(problems) > 0 {
		return Control{}, "", true
	}
	return c, "", false
}

// awaitingControl says why the settled file name (fi), which has no
// control file, waits for one under delivery d ("": it does not).
func awaitingControl(name string, fi fs.FileInfo, o SpoolOptions, d Delivery, now time.Time) string {
	switch {
	case d == DeliveryControl:
		return fmt.Sprintf("waits for its control file %s (--delivery control): the sender writes it once the file is complete", name+ControlExt)
	case o.Load.RequireControl && now.Sub(fi.ModTime()) < 2*o.Settle:
		// Settled, and its required .ctl not there yet: it waits
		// another settle; then the load refuses it, saying so.
		return fmt.Sprintf("waits for its control file %s (--require-control)", name+ControlExt)
	}
	return ""
}

// incompleteLastLine reports whether the non-empty text file at path does
// not end in a line break. A file with a NUL byte in its first 4 KiB is no
// text (binary data, UTF-16): it is no CSV file still being written, and
// the load refuses it.
func incompleteLastLine(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false // vanished: the caller sees it
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || info.Size() == 0 {
		return false
	}
	head := make([]byte, min(info.Size(), 4096))
	if _, err := io.ReadFull(f, head); err != nil || bytes.IndexByte(head, 0) >= 0 {
		return false
	}
	var b [1]byte
	if _, err := f.ReadAt(b[:], info.Size()-1); err != nil && err != io.EOF {
		return false
	}
	return b[0] != '\n' && b[0] != '\r'
}

// writeHeld rewrites outbox/held.csv with the overdue files of held (and
// removes it when there are none).
func writeHeld(dir string, held []HeldFile) error {
	path := filepath.Join(dir, Outbox, HeldListing)
	var overdue []HeldFile
	for _, h := range held {
		if h.Overdue {
			overdue = append(overdue, h)
		}
	}
	if len(overdue) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("spool: %w", err)
		}
		return nil
	}
	slices.SortFunc(overdue, func(a, b HeldFile) int { return strings.Compare(a.File, b.File) })
	return writeAtomic(path, func(f *os.File) error {
		w := csv.NewWriter(f)
		_ = w.Write([]string{"file", "held_since", "reason"})
		for _, h := range overdue {
			// File names and reasons come from senders: neutralised
			// like every cell the product writes.
			_ = w.Write([]string{report.Neutralize(h.File), h.Since.UTC().Format(time.RFC3339), report.Neutralize(h.Reason)})
		}
		w.Flush()
		return w.Error()
	})
}

// writeDeliveryNote keeps inbox/.delivery saying which contract is in
// force (rewritten only when it changes).
func writeDeliveryNote(dir string, d Delivery) error {
	var text string
	switch d {
	case DeliveryControl:
		text = "control\n# payout load --delivery control: a file NAME is taken once NAME.ctl is next to it.\n" +
			"# Write NAME first, then NAME.ctl (empty, or rows=, total=, size=, sha256= lines).\n"
	default:
		text = "rename\n# payout load --delivery rename: every file under its own name is complete.\n" +
			"# Write it under a temporary name (.NAME, NAME.part, NAME.tmp) or elsewhere on this filesystem, then rename it.\n"
	}
	path := filepath.Join(dir, Inbox, DeliveryNote)
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, []byte(text)) {
		return nil
	}
	return writeAtomic(path, func(f *os.File) error {
		_, err := io.WriteString(f, text)
		return err
	})
}

// sentPath is where, in processing/, the inode the sender wrote stays
// while the spool loads its copy of the file name.
func sentPath(processing, name string) string {
	return filepath.Join(processing, "."+name+".sent")
}

// privatize replaces the file at path (just taken, of size and modTime
// as inspected) by a copy of its bytes, keeping the sender's inode as
// sentPath: no descriptor the sender still holds reaches the copy.
// changed is true (and nothing replaced) when the file changed while it
// was copied. A filesystem without hard links keeps the sender's file.
func privatize(path string, size int64, modTime time.Time) (changed bool, err error) {
	dir, name := filepath.Split(path)
	sent := sentPath(dir, name)
	if err := os.Remove(sent); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("spool: %w", err)
	}
	if err := os.Link(path, sent); err != nil {
		return false, nil // no hard links here: the sender's file is read
	}
	src, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("spool: %w", err)
	}
	defer src.Close()
	tmp, err := os.CreateTemp(dir, "."+name+".*"+copySuffix)
	if err != nil {
		return false, fmt.Errorf("spool: %w", err)
	}
	defer os.Remove(tmp.Name())
	n, err := io.Copy(tmp, src)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("spool: copy %s: %w", name, err)
	}
	fi, err := src.Stat()
	if err != nil {
		return false, fmt.Errorf("spool: %w", err)
	}
	if n != size || fi.Size() != size || !fi.ModTime().Equal(modTime) {
		_ = os.Remove(sent)
		return true, nil
	}
	if err := os.Chmod(tmp.Name(), 0o600); err != nil {
		return false, fmt.Errorf("spool: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return false, fmt.Errorf("spool: %w", err)
	}
	return false, nil
}

// copySuffix ends the name of a copy being made by privatize; one left by
// a killed run is removed by the next.
const copySuffix = ".copy"

// removeStaleCopies removes the copies a killed run left in processing/.
func removeStaleCopies(processing string) {
	entries, err := os.ReadDir(processing)
	if err != nil {
		return
	}
	for _, e := range entries {
		if n := e.Name(); strings.HasPrefix(n, ".") && strings.HasSuffix(n, copySuffix) {
			_ = os.Remove(filepath.Join(processing, n))
		}
	}
}

// removeOrphanSent removes the sender's inodes (.NAME.sent) whose file is
// no longer in processing/: a run killed between moving NAME to done/ or
// failed/ and sentLater leaves it, with the card numbers the sender wrote,
// and nothing else would ever purge it. It returns the names removed.
func removeOrphanSent(processing string, log zerolog.Logger) []string {
	entries, err := os.ReadDir(processing)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range entries {
		n := e.Name()
		name, ok := strings.CutSuffix(strings.TrimPrefix(n, "."), ".sent")
		if !ok || !strings.HasPrefix(n, ".") || name == "" {
			continue
		}
		if _, err := os.Lstat(filepath.Join(processing, name)); err == nil || !errors.Is(err, fs.ErrNotExist) {
			continue // its file is still being worked on: sentLater forgets it
		}
		if err := os.Remove(filepath.Join(processing, n)); err != nil {
			log.Error().Err(err).Str("file", name).Msg("cannot remove the sender's copy of a file already processed")
			continue
		}
		log.Warn().Str("file", name).Msg("removed the sender's copy of a file already processed, left by an interrupted run")
		removed = append(removed, n)
	}
	return removed
}

// sentLater tells whether the sender wrote to its file after the spool
// copied it (loaded is the copy, wherever it moved), and forgets the
// sender's inode.
func sentLater(processing, name, loaded string) (later bool, sentSize int64) {
	sent := sentPath(processing, name)
	si, err := os.Stat(sent)
	if err != nil {
		return false, 0
	}
	defer os.Remove(sent)
	li, err := os.Stat(loaded)
	if err != nil || os.SameFile(si, li) {
		return false, 0
	}
	return si.Size() != li.Size() || si.ModTime().After(li.ModTime()), si.Size()
}
