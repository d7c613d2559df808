package loader

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/rs/zerolog"
)

// The spool's delivery tests drive the settle window with SpoolOptions.Now:
// a writer "stalls longer than --settle" when the clock the spool judges
// by is set past its file's last change plus settle. Nothing sleeps.

// stallFile is a file whose writer stalls: complete is what it ends as,
// cut is where the writer stalls.
const stallFile = "externalId,telecomOperator,amount\n" +
	"SWC-1,MTS,10.00\n" +
	"SWC-2,MTS,1500.00\n" +
	"SWC-3,MTS,20.00\n" +
	"SWC-4,MTS,30.00\n"

// cutAt returns stallFile up to and including the first occurrence of
// mark.
func cutAt(mark string) string {
	i := strings.Index(stallFile, mark)
	if i < 0 {
		panic(mark)
	}
	return stallFile[:i+len(mark)]
}

// spoolClock is a settable clock for SpoolOptions.Now.
type spoolClock struct{ t time.Time }

func (c *spoolClock) now() time.Time { return c.t }

// after sets the clock to d after the last change of the file at path.
func (c *spoolClock) after(t *testing.T, path string, d time.Duration) {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	c.t = info.ModTime().Add(d)
}

func newSpool(t *testing.T) (dir, inbox string) {
	t.Helper()
	dir = t.TempDir()
	inbox = filepath.Join(dir, Inbox)
	if err := os.MkdirAll(inbox, 0o750); err != nil {
		t.Fatal(err)
	}
	return dir, inbox
}

func appendFile(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// setMtime sets the file's modification time (a later write, as the
// clock goes).
func setMtime(t *testing.T, path string, at time.Time) {
	t.Helper()
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// heldReason returns why name was held in res ("" if it was not).
func heldReason(res SpoolResult, name string) string {
	for _, h := range res.Held {
		if h.File == name {
			return h.Reason
		}
	}
	return ""
}

// TestSpoolWriterStalls: a writer that stalls longer than --settle in the
// middle of the last line or at a row boundary never has part of its file
// loaded: under each contract the file is held until it is complete, then
// loaded whole (SWC-2 with 1500.00, all 4 rows). On the old spool (a file
// unchanged for --settle was taken) the cut file was loaded.
func TestSpoolWriterStalls(t *testing.T) {
	const settle = 30 * time.Second
	tests := []struct {
		name     string
		delivery Delivery
		cut      string // what is written before the stall
		ctlFirst string // a control file written before the stall ("" none)
		ctlAfter string // the control file written once the file is complete ("" none)
		held     string // why the cut file is held
	}{
		{name: "control, mid-line", delivery: DeliveryControl, cut: cutAt("SWC-2,MTS,15"), ctlAfter: "\n",
			held: "waits for its control file p.csv.ctl (--delivery control)"},
		{name: "control, row boundary", delivery: DeliveryControl, cut: cutAt("SWC-2,MTS,1500.00\n"), ctlAfter: "\n",
			held: "waits for its control file p.csv.ctl (--delivery control)"},
		{name: "rename contract broken, mid-line", delivery: DeliveryRename, cut: cutAt("SWC-2,MTS,15"),
			held: "its last line is incomplete (no newline at the end)"},
		{name: "control file with size first, row boundary", delivery: DeliveryControl, cut: cutAt("SWC-2,MTS,1500.00\n"),
			ctlFirst: fmt.Sprintf("size=%d\n", len(stallFile)), held: "still arriving: "},
		{name: "control file with sha256 and size first, mid-line", delivery: DeliveryRename, cut: cutAt("SWC-2,MTS,15"),
			ctlFirst: fmt.Sprintf("size=%d\nsha256=%s\n", len(stallFile), sha256Hex(stallFile)), held: "still arriving: "},
		{name: "bare marker written too early, row boundary", delivery: DeliveryControl, cut: cutAt("SWC-2,MTS,1500.00\n"),
			ctlFirst: "", ctlAfter: "", held: "changed after its control file p.csv.ctl was written"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			dir, in := newSpool(t)
			clock := &spoolClock{}
			o := SpoolOptions{Delivery: tt.delivery, Settle: settle, Now: clock.now}
			path := writeFile(t, in, "p.csv", tt.cut)
			early := tt.ctlFirst != "" || strings.HasPrefix(tt.name, "bare marker")
			if early {
				ctl := writeFile(t, in, "p.csv.ctl", tt.ctlFirst)
				// The marker predates the stalled part of the file.
				info, _ := os.Stat(path)
				setMtime(t, ctl, info.ModTime().Add(-time.Second))
			}
			clock.after(t, path, 10*settle) // the writer stalls, long
			res, err := f.ld.Spool(ctx, dir, o)
			if err != nil || len(res.Files) != 0 || !strings.Contains(heldReason(res, "p.csv"), tt.held) {
				t.Fatalf("stalled file: held %q, want %q; %+v %v", heldReason(res, "p.csv"), tt.held, res, err)
			}
			if n := f.keys(); n != 0 {
				t.Fatalf("a held file left %d keys in Redis", n)
			}
			// The writer finishes (and says so).
			appendFile(t, path, strings.TrimPrefix(stallFile, tt.cut))
			info, _ := os.Stat(path)
			if !info.ModTime().After(clock.t) {
				setMtime(t, path, clock.t.Add(time.Second)) // the filesystem's clock lags ours
			}
			if tt.ctlAfter != "" || early && tt.ctlFirst == "" {
				ctl := writeFile(t, in, "p.csv.ctl", tt.ctlAfter)
				info, _ := os.Stat(path)
				setMtime(t, ctl, info.ModTime().Add(time.Second))
			}
			clock.t = clock.t.Add(time.Second)
			res, err = f.ld.Spool(ctx, dir, o)
			if err != nil || len(res.Files) != 0 || !strings.Contains(heldReason(res, "p.csv"), "still changing") {
				t.Fatalf("a file just finished must settle first: %+v %v", res, err)
			}
			clock.t = clock.t.Add(2 * settle)
			res, err = f.ld.Spool(ctx, dir, o)
			if err != nil || len(res.Files) != 1 || !res.Files[0].Loaded || res.Files[0].Registered != 4 || len(res.Held) != 0 {
				t.Fatalf("complete file: %+v %v", res, err)
			}
			p, err := f.led.Get(ctx, res.Files[0].Batch, "SWC-2")
			if err != nil || money.MustParse(p.Amount).Cmp(money.MustParse("1500.00")) != 0 || p.State != lifecycle.Queued {
				t.Fatalf("SWC-2: %+v %v", p, err)
			}
			if !exists(filepath.Join(dir, Done, "p.csv")) || exists(filepath.Join(dir, Outbox, HeldListing)) {
				t.Fatal("p.csv not in done/, or a held listing left behind")
			}
		})
	}
}

// TestSpoolGrowingFile: a file written to during the settle window is
// held, however often; once quiet for --settle it is taken.
func TestSpoolGrowingFile(t *testing.T) {
	const settle = time.Minute
	f := newFixture(t)
	dir, in := newSpool(t)
	clock := &spoolClock{}
	o := SpoolOptions{Delivery: DeliveryRename, Settle: settle, Now: clock.now}
	path := writeFile(t, in, "g.csv", cutAt("SWC-1,MTS,10.00\n"))
	at := time.Now().Add(-time.Hour)
	for i, row := range []string{"SWC-2,MTS,1500.00\n", "SWC-3,MTS,20.00\n", "SWC-4,MTS,30.00\n"} {
		setMtime(t, path, at)
		clock.t = at.Add(settle - time.Second)
		res, err := f.ld.Spool(context.Background(), dir, o)
		if err != nil || len(res.Files) != 0 || !strings.Contains(heldReason(res, "g.csv"), "still changing: modified 59s ago (--settle 1m0s)") {
			t.Fatalf("write %d: a growing file was not held: %+v %v", i, res, err)
		}
		appendFile(t, path, row)
		at = at.Add(settle - time.Second)
	}
	setMtime(t, path, at)
	clock.t = at.Add(settle)
	res, err := f.ld.Spool(context.Background(), dir, o)
	if err != nil || len(res.Files) != 1 || res.Files[0].Registered != 4 {
		t.Fatalf("settled file: %+v %v", res, err)
	}
}

// TestSpoolControlFileBytes: a control file's size and sha256 are checked
// against the file: a file longer than declared, or of other bytes, is
// refused (failed/, the errors file naming both figures); a matching one
// loads even without a newline at its end.
func TestSpoolControlFileBytes(t *testing.T) {
	noNewline := strings.TrimSuffix(stallFile, "\n")
	tests := []struct {
		name, file, ctl string
		loaded          bool
		errs            string
	}{
		{name: "wrong size", file: stallFile, ctl: fmt.Sprintf("size=%d\n", len(stallFile)-5),
			errs: fmt.Sprintf("p.csv,,control,control file: the file is %d bytes; p.csv.ctl declares size=%d", len(stallFile), len(stallFile)-5)},
		{name: "wrong sha256", file: stallFile, ctl: "sha256=" + sha256Hex(strings.Replace(stallFile, "1500.00", "15", 1)) + "\n",
			errs: "p.csv,,control,control file: the file's SHA-256 is " + sha256Hex(stallFile)},
		{name: "right size and sha256, no final newline", file: noNewline,
			ctl: fmt.Sprintf("size=%d\nsha256=%s\n", len(noNewline), strings.ToUpper(sha256Hex(noNewline))), loaded: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			dir, in := newSpool(t)
			writeFile(t, in, "p.csv", tt.file)
			writeFile(t, in, "p.csv.ctl", tt.ctl)
			res, err := f.ld.Spool(context.Background(), dir, SpoolOptions{})
			if err != nil || len(res.Files) != 1 || res.Files[0].Loaded != tt.loaded {
				t.Fatalf("%+v %v", res, err)
			}
			if tt.loaded {
				if res.Files[0].Registered != 4 || !exists(filepath.Join(dir, Done, "p.csv.ctl")) {
					t.Fatalf("%+v", res)
				}
				return
			}
			errs, _ := os.ReadFile(filepath.Join(dir, Outbox, "p.csv.errors.csv"))
			if !strings.Contains(string(errs), tt.errs) || !exists(filepath.Join(dir, Failed, "p.csv")) {
				t.Fatalf("errors file:\n%s\nwant %s", errs, tt.errs)
			}
			if n := f.keys(); n != 0 {
				t.Fatalf("a refused file left %d keys in Redis", n)
			}
		})
	}
}

// TestSpoolAtomicRename: under --delivery rename a sender's temporary
// names are never taken, and the renamed file is taken at once; under the
// default (control) it waits for its marker. inbox/.delivery names the
// contract in force.
func TestSpoolAtomicRename(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dir, in := newSpool(t)
	o := SpoolOptions{Delivery: DeliveryRename}
	temps := []string{".p.csv", "p.csv.part", "p.csv.tmp", "p.csv~", "p.csv.partial", "p.csv.filepart"}
	for _, n := range temps {
		writeFile(t, in, n, cutAt("SWC-2,MTS,15"))
	}
	res, err := f.ld.Spool(ctx, dir, o)
	if err != nil || len(res.Files) != 0 || len(res.Held) != 0 {
		t.Fatalf("a temporary name was looked at: %+v %v", res, err)
	}
	note, _ := os.ReadFile(filepath.Join(in, DeliveryNote))
	if !strings.HasPrefix(string(note), "rename\n") {
		t.Fatalf("inbox/.delivery: %q", note)
	}
	writeFile(t, in, "p.csv.tmp", stallFile)
	if err := os.Rename(filepath.Join(in, "p.csv.tmp"), filepath.Join(in, "p.csv")); err != nil {
		t.Fatal(err)
	}
	res, err = f.ld.Spool(ctx, dir, o)
	if err != nil || len(res.Files) != 1 || res.Files[0].Registered != 4 {
		t.Fatalf("renamed file: %+v %v", res, err)
	}

	// The default contract: a renamed file without its marker waits.
	writeFile(t, in, "q.csv", strings.ReplaceAll(stallFile, "SWC-", "Q-"))
	res, err = f.ld.Spool(ctx, dir, SpoolOptions{})
	if err != nil || len(res.Files) != 0 || !strings.Contains(heldReason(res, "q.csv"), "waits for its control file q.csv.ctl") {
		t.Fatalf("default contract: %+v %v", res, err)
	}
	note, _ = os.ReadFile(filepath.Join(in, DeliveryNote))
	if !strings.HasPrefix(string(note), "control\n") {
		t.Fatalf("inbox/.delivery: %q", note)
	}
}

// TestSpoolHeldTooLong: a file held longer than HeldReport is reported in
// outbox/held.csv (and Overdue), and the listing goes once it is taken.
func TestSpoolHeldTooLong(t *testing.T) {
	f := newFixture(t)
	dir, in := newSpool(t)
	clock := &spoolClock{}
	o := SpoolOptions{Settle: time.Minute, HeldReport: time.Hour, Now: clock.now}
	path := writeFile(t, in, "late.csv", stallFile)
	clock.after(t, path, 30*time.Minute)
	res, err := f.ld.Spool(context.Background(), dir, o)
	if err != nil || len(res.Held) != 1 || len(res.Overdue()) != 0 || exists(filepath.Join(dir, Outbox, HeldListing)) {
		t.Fatalf("held 30 min: %+v %v", res, err)
	}
	clock.after(t, path, 61*time.Minute)
	res, err = f.ld.Spool(context.Background(), dir, o)
	if err != nil || len(res.Overdue()) != 1 {
		t.Fatalf("held 61 min: %+v %v", res, err)
	}
	listing, _ := os.ReadFile(filepath.Join(dir, Outbox, HeldListing))
	want := "file,held_since,reason\nlate.csv," + res.Held[0].Since.UTC().Format(time.RFC3339) + ",waits for its control file late.csv.ctl"
	if !strings.HasPrefix(string(listing), want) {
		t.Fatalf("held listing:\n%s\nwant %s", listing, want)
	}
	setMtime(t, writeFile(t, in, "late.csv.ctl", ""), clock.t.Add(-2*time.Minute))
	res, err = f.ld.Spool(context.Background(), dir, o)
	if err != nil || len(res.Files) != 1 || !res.Files[0].Loaded || exists(filepath.Join(dir, Outbox, HeldListing)) {
		t.Fatalf("marker arrived: %+v %v", res, err)
	}
}

// TestSpoolSameNameInProcessing: a file of the name of one still in
// processing/ (a run was killed) waits; it never replaces it.
func TestSpoolSameNameInProcessing(t *testing.T) {
	f := newFixture(t)
	dir, in := newSpool(t)
	os.MkdirAll(filepath.Join(dir, Processing), 0o750)
	// Resumed, it fails (its .ctl asks for 5 rows); the new one then loads.
	writeFile(t, filepath.Join(dir, Processing), "p.csv", stallFile)
	writeFile(t, filepath.Join(dir, Processing), "p.csv.ctl", "rows=5\n")
	writeFile(t, in, "p.csv", strings.ReplaceAll(stallFile, "SWC-", "N-"))
	res, err := f.ld.Spool(context.Background(), dir, SpoolOptions{Delivery: DeliveryRename})
	if err != nil || len(res.Files) != 1 || res.Files[0].Loaded || !strings.Contains(heldReason(res, "p.csv"), "still in processing/") {
		t.Fatalf("first run: %+v %v", res, err)
	}
	res, err = f.ld.Spool(context.Background(), dir, SpoolOptions{Delivery: DeliveryRename})
	if err != nil || len(res.Files) != 1 || !res.Files[0].Loaded || res.Files[0].Registered != 4 {
		t.Fatalf("second run: %+v %v", res, err)
	}
}

// rezip copies the ZIP package src with the part name changed by edit.
func rezip(t *testing.T, src []byte, name string, edit func([]byte) []byte) []byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(src), int64(len(src)))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	for _, f := range zr.File {
		r, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		if f.Name == name {
			data = edit(data)
		}
		w, err := zw.Create(f.Name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// odsPackage is an OpenDocument spreadsheet's package: what a .ods
// renamed .xlsx holds.
func odsPackage(t *testing.T) []byte {
	t.Helper()
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	for _, p := range []struct{ name, text string }{
		{"mimetype", "application/vnd.oasis.opendocument.spreadsheet"},
		{"META-INF/manifest.xml", `<?xml version="1.0" encoding="UTF-8"?><manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0"><manifest:file-entry manifest:full-path="/" manifest:media-type="application/vnd.oasis.opendocument.spreadsheet"/></manifest:manifest>`},
		{"content.xml", `<?xml version="1.0" encoding="UTF-8"?><office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"/>`},
	} {
		w, err := zw.Create(p.name)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, p.text)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestSpoolBadFilesDoNotBlock: a spool holding good files and files that
// cannot be read loads the good ones, refuses each bad one to failed/
// with outbox/NAME.errors.csv naming the cause, returns no error (payout
// load: exit 1, not 3), and a second run does nothing new. On the old
// spool the workbook with a DTD entity ended the run with an error
// (exit 3), stayed in processing/, and stopped every later run first.
func TestSpoolBadFilesDoNotBlock(t *testing.T) {
	for _, delivery := range []Delivery{DeliveryControl, DeliveryRename} {
		t.Run(string(delivery), func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			dir, in := newSpool(t)
			wb := filepath.Join(t.TempDir(), "w.xlsx")
			writeWorkbook(t, wb, "finance")
			good, err := os.ReadFile(wb)
			if err != nil {
				t.Fatal(err)
			}
			dtd := rezip(t, good, "xl/worksheets/sheet1.xml", func(b []byte) []byte {
				b = bytes.Replace(b, []byte("?>"), []byte(`?><!DOCTYPE worksheet [<!ENTITY x "A-9">]>`), 1)
				return bytes.Replace(b, []byte(`<row r="2">`), []byte(`<row r="2"><c r="F2" t="inlineStr"><is><t>&x;</t></is></c>`), 1)
			})
			files := []struct {
				name  string
				data  []byte
				cause string // in the errors file; "" for a good file
			}{
				{"a-good1.csv", []byte(stallFile), ""},
				{"b-dtd.xlsx", dtd, "the workbook is refused: its XML has a DTD, an entity"},
				{"c-truncated.xlsx", good[:len(good)/2], "not an XLSX workbook (a damaged or truncated ZIP package"},
				{"d-ods.xlsx", odsPackage(t), "not an XLSX workbook"},
				{"e-junk.csv", bytes.Repeat([]byte{0x89, 'P', 'N', 'G', 0, 1, 2, 0xff}, 64), "NUL byte at column 5"},
				{"f-utf16.csv", []byte("\xff\xfee\x00x\x00t\x00\n\x00"), "the file is UTF-16 text; save it as UTF-8"},
				{"g-empty.csv", nil, "the file is empty"},
				{"h-good2.csv", []byte(strings.ReplaceAll(stallFile, "SWC-", "G2-")), ""},
			}
			for _, fl := range files {
				writeFile(t, in, fl.name, string(fl.data))
				if delivery == DeliveryControl {
					writeFile(t, in, fl.name+ControlExt, "")
				}
			}
			res, err := f.ld.Spool(ctx, dir, SpoolOptions{Delivery: delivery})
			if err != nil || len(res.Files) != len(files) || len(res.Held) != 0 {
				t.Fatalf("spool: %+v %v", res, err)
			}
			for i, fl := range files {
				r := res.Files[i]
				if r.File != fl.name || r.Loaded != (fl.cause == "") {
					t.Errorf("%s: %+v", fl.name, r)
					continue
				}
				if fl.cause == "" {
					if r.Registered != 4 || !exists(filepath.Join(dir, Done, fl.name)) {
						t.Errorf("%s: not loaded: %+v", fl.name, r)
					}
					continue
				}
				errs, _ := os.ReadFile(filepath.Join(dir, Outbox, fl.name+".errors.csv"))
				if !exists(filepath.Join(dir, Failed, fl.name)) || !strings.Contains(string(errs), fl.cause) || !strings.Contains(string(errs), fl.name+",") {
					t.Errorf("%s: not in failed/, or its errors file does not name %q:\n%s", fl.name, fl.cause, errs)
				}
			}
			if left, _ := os.ReadDir(filepath.Join(dir, Processing)); len(left) != 0 {
				t.Errorf("files left in processing/: %v", left)
			}
			keys := f.keys()
			again, err := f.ld.Spool(ctx, dir, SpoolOptions{Delivery: delivery})
			if err != nil || len(again.Files) != 0 || len(again.Held) != 0 || f.keys() != keys {
				t.Fatalf("second run: %+v %v", again, err)
			}
		})
	}
}

// TestSpoolBadFileLeftInProcessing: a file that cannot be read, left in
// processing/ by a killed run, is refused when resumed; the files after
// it load.
func TestSpoolBadFileLeftInProcessing(t *testing.T) {
	f := newFixture(t)
	dir, in := newSpool(t)
	os.MkdirAll(filepath.Join(dir, Processing), 0o750)
	wb := filepath.Join(t.TempDir(), "w.xlsx")
	writeWorkbook(t, wb, "finance")
	good, _ := os.ReadFile(wb)
	writeFile(t, filepath.Join(dir, Processing), "stuck.xlsx", string(rezip(t, good, "xl/worksheets/sheet1.xml", func(b []byte) []byte {
		b = bytes.Replace(b, []byte("?>"), []byte(`?><!DOCTYPE worksheet [<!ENTITY x "A-9">]>`), 1)
		return bytes.Replace(b, []byte(`<row r="2">`), []byte(`<row r="2"><c r="F2" t="inlineStr"><is><t>&x;</t></is></c>`), 1)
	})))
	writeFile(t, in, "next.csv", stallFile)
	res, err := f.ld.Spool(context.Background(), dir, SpoolOptions{Delivery: DeliveryRename})
	if err != nil || len(res.Files) != 2 || res.Files[0].Loaded || !res.Files[1].Loaded {
		t.Fatalf("%+v %v", res, err)
	}
	if !exists(filepath.Join(dir, Failed, "stuck.xlsx")) || !exists(filepath.Join(dir, Outbox, "stuck.xlsx.errors.csv")) {
		t.Fatal("the stuck workbook was not refused to failed/")
	}
}

// failingSealer fails for one card number, as a fault of the
// infrastructure while one file loads.
type failingSealer struct {
	Sealer
	card string
}

var errSealer = errors.New("sealer unreachable")

func (s failingSealer) Seal(plaintext, ad string) (string, error) {
	if plaintext == s.card {
		return "", errSealer
	}
	return s.Sealer.Seal(plaintext, ad)
}

// TestSpoolInfraErrorDoesNotBlock: an infrastructure error while loading
// one file leaves that file in processing/ (the next run resumes it) and
// the run goes on with the next files; the error is returned (exit 3),
// and is not taken for the file's fault.
func TestSpoolInfraErrorDoesNotBlock(t *testing.T) {
	f := newFixture(t)
	f.ld.sealer = failingSealer{Sealer: f.ring, card: "4111111111111111"}
	dir, in := newSpool(t)
	writeFile(t, in, "a-cards.csv", goodCSV)
	writeFile(t, in, "b-phones.csv", stallFile)
	res, err := f.ld.Spool(context.Background(), dir, SpoolOptions{Delivery: DeliveryRename})
	if !errors.Is(err, errSealer) || len(res.Files) != 1 || res.Files[0].File != "b-phones.csv" || !res.Files[0].Loaded {
		t.Fatalf("%+v %v", res, err)
	}
	if !exists(filepath.Join(dir, Processing, "a-cards.csv")) || exists(filepath.Join(dir, Failed, "a-cards.csv")) {
		t.Fatal("a-cards.csv should wait in processing/ for the next run")
	}
	f.ld.sealer = f.ring
	res, err = f.ld.Spool(context.Background(), dir, SpoolOptions{Delivery: DeliveryRename})
	if err != nil || len(res.Files) != 1 || !res.Files[0].Loaded || !exists(filepath.Join(dir, Done, "a-cards.csv")) {
		t.Fatalf("resumed: %+v %v", res, err)
	}
}

// writingSealer seals like its sealer and, at its first call, has the
// sender write one more row through the descriptor it still holds: a
// sender that breaks the contract while the file is being loaded.
type writingSealer struct {
	Sealer
	w    *os.File
	done bool
}

func (s *writingSealer) Seal(plaintext, ad string) (string, error) {
	if !s.done {
		s.done = true
		if _, err := s.w.WriteString("A-9,5.00,,MTS\n"); err != nil {
			return "", err
		}
	}
	return s.Sealer.Seal(plaintext, ad)
}

// TestSpoolSenderStillWriting: a sender that still holds its file open
// after the file was taken cannot change what is loaded: the spool loads
// its own copy (the file as taken: 3 rows, its batch id the hash of those
// bytes, done/ holds them), and the late write is reported as a warning.
// On the old spool the loader read the sender's inode: done/p.csv held
// the late row.
func TestSpoolSenderStillWriting(t *testing.T) {
	f := newFixture(t)
	dir, in := newSpool(t)
	w, err := os.OpenFile(filepath.Join(in, "p.csv"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.WriteString(goodCSV); err != nil {
		t.Fatal(err)
	}
	f.ld.sealer = &writingSealer{Sealer: f.ring, w: w}
	res, err := f.ld.Spool(context.Background(), dir, SpoolOptions{Delivery: DeliveryRename})
	if err != nil || len(res.Files) != 1 || !res.Files[0].Loaded || res.Files[0].Registered != 3 {
		t.Fatalf("%+v %v", res, err)
	}
	want, _ := BatchID(strings.NewReader(goodCSV))
	loaded, _ := os.ReadFile(filepath.Join(dir, Done, "p.csv"))
	if string(loaded) != goodCSV || res.Files[0].Batch != want {
		t.Fatalf("done/p.csv is not the file as taken (batch %s, want %s):\n%s", res.Files[0].Batch, want, loaded)
	}
	if ws := strings.Join(res.Files[0].Warnings, "\n"); !strings.Contains(ws, fmt.Sprintf("its sender wrote to the file after it was taken (it is %d bytes now)", len(goodCSV+"A-9,5.00,,MTS\n"))) {
		t.Fatalf("no warning of the late write: %s", ws)
	}
	if left, _ := os.ReadDir(filepath.Join(dir, Processing)); len(left) != 0 {
		t.Fatalf("left in processing/: %v", left)
	}
}

// TestPrivatize: the spool's copy is another inode than the sender's,
// which stays as .NAME.sent; a file that is not as inspected (it changed
// while being taken) is left alone and reported changed.
func TestPrivatize(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "p.csv", goodCSV)
	before, _ := os.Stat(path)
	changed, err := privatize(path, before.Size(), before.ModTime().Add(-time.Second))
	if err != nil || !changed || exists(sentPath(dir, "p.csv")) {
		t.Fatalf("a changed file: changed %v, %v", changed, err)
	}
	if after, _ := os.Stat(path); !os.SameFile(before, after) {
		t.Fatal("a changed file was replaced")
	}
	changed, err = privatize(path, before.Size(), before.ModTime())
	if err != nil || changed {
		t.Fatalf("changed %v, %v", changed, err)
	}
	after, _ := os.Stat(path)
	sent, err := os.Stat(sentPath(dir, "p.csv"))
	if err != nil || os.SameFile(before, after) || !os.SameFile(before, sent) || after.Mode().Perm() != 0o600 {
		t.Fatalf("copy %v, sent %v, %v", after, sent, err)
	}
	if data, _ := os.ReadFile(path); string(data) != goodCSV {
		t.Fatalf("copy holds %q", data)
	}
}

// TestSpoolResumesAfterAKilledTake: a run killed while it copied a taken
// file leaves processing/NAME, its .NAME.sent and a half copy: the next
// run removes the copy, loads the file, and reports no late write.
func TestSpoolResumesAfterAKilledTake(t *testing.T) {
	f := newFixture(t)
	dir, _ := newSpool(t)
	proc := filepath.Join(dir, Processing)
	os.MkdirAll(proc, 0o750)
	path := writeFile(t, proc, "p.csv", goodCSV)
	if err := os.Link(path, sentPath(proc, "p.csv")); err != nil {
		t.Fatal(err)
	}
	half := writeFile(t, proc, ".p.csv.123"+copySuffix, goodCSV[:40])
	res, err := f.ld.Spool(context.Background(), dir, SpoolOptions{})
	if err != nil || len(res.Files) != 1 || !res.Files[0].Loaded || strings.Contains(strings.Join(res.Files[0].Warnings, "\n"), "its sender wrote") {
		t.Fatalf("%+v %v", res, err)
	}
	if left, _ := os.ReadDir(proc); len(left) != 0 || exists(half) {
		t.Fatalf("left in processing/: %v", left)
	}
}

// TestSpoolRemovesOrphanSentInodes: a run killed after moving a file to
// done/ (or failed/) and before forgetting the sender's inode left
// processing/.NAME.sent, the sender's file with its card numbers, which
// nothing purged. The next Spool removes it, logged; the inode of a file
// still in processing/ stays (its load resumes and reads it).
func TestSpoolRemovesOrphanSentInodes(t *testing.T) {
	f := newFixture(t)
	var logs bytes.Buffer
	f.ld.log = zerolog.New(&logs)
	dir, _ := newSpool(t)
	proc := filepath.Join(dir, Processing)
	if err := os.MkdirAll(proc, 0o750); err != nil {
		t.Fatal(err)
	}
	orphan := writeFile(t, proc, ".gone.csv.sent", "externalId,telecomOperator,amount\nG-1,MTS,1.00\n")
	writeFile(t, proc, "open.csv", "externalId,telecomOperator,amount\nO-1,MTS,1.00\n")
	if _, err := f.ld.Spool(context.Background(), dir, SpoolOptions{Delivery: DeliveryRename}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(orphan); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s left in processing/ (stat: %v)", filepath.Base(orphan), err)
	}
	if !strings.Contains(logs.String(), `"file":"gone.csv"`) || !strings.Contains(logs.String(), "sender's copy") {
		t.Errorf("the removal is not logged:\n%s", logs.String())
	}
	// open.csv was loaded this run, so its inode went with sentLater;
	// what matters is that the orphan check did not take it before.
	if _, err := os.Stat(filepath.Join(dir, Done, "open.csv")); err != nil {
		t.Errorf("open.csv not loaded: %v", err)
	}
	// Called alone, it leaves the inode of a file still in processing/.
	writeFile(t, proc, "busy.csv", "x")
	busy := writeFile(t, proc, ".busy.csv.sent", "x")
	if got := removeOrphanSent(proc, zerolog.Nop()); len(got) != 0 {
		t.Errorf("removed %v, want nothing", got)
	}
	if _, err := os.Stat(busy); err != nil {
		t.Errorf("the inode of busy.csv, still in processing/, was removed: %v", err)
	}
}
