package payfile

import (
	"archive/zip"
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
)

// A workbook is read by this package's own streaming reader (archive/zip
// and encoding/xml's token stream), never unpacked whole: every part is
// inflated through a counter that stops at a bound, and tokenised through
// xmlGuard, which refuses DTDs, entities, comments and CDATA and any run
// of text or whitespace longer than a bound (encoding/xml gathers a run of
// character data into one buffer). The bounds below hold for any input;
// a workbook over one of them is refused as a whole, with the bound named.
const (
	// XLSXMaxFileBytes bounds the size of the workbook file itself when
	// it has to be read into memory (a reader that is not a file).
	XLSXMaxFileBytes = 64 << 20
	// XLSXMaxInflated bounds the unzipped bytes of all the parts read
	// (workbook, relationships, styles, shared strings and the sheet).
	XLSXMaxInflated = 256 << 20
	// XLSXMaxToken bounds one XML token: a run of text or whitespace, or a
	// tag with its attributes (a cell holds at most 32767 characters).
	XLSXMaxToken = 1 << 20
	// XLSXMaxRows is the number of rows of a sheet (Excel's own limit).
	XLSXMaxRows = 1 << 20
	// XLSXMaxColumns is the number of columns of a sheet (Excel's own).
	XLSXMaxColumns = 16384
	// XLSXMaxCells bounds the cells of a sheet, empty ones included.
	XLSXMaxCells = 4 << 20
	// XLSXMaxSharedStrings bounds the entries of the shared string table.
	XLSXMaxSharedStrings = 1 << 20
	// XLSXMaxSharedBytes bounds the text of the shared string table.
	XLSXMaxSharedBytes = 32 << 20
	// xlsxMaxStyles bounds the cell formats and number formats (Excel's
	// own limit is 64000 formats).
	xlsxMaxStyles = 1 << 16
	// xlsxMaxSheets bounds the sheets listed by a workbook.
	xlsxMaxSheets = 4096
)

// errXLSXLimit is matched by the error of a workbook over one of the
// bounds, or of a construct a spreadsheet never writes (a DTD).
var errXLSXLimit = errors.New("workbook over a bound")

// limitError is a workbook refused for its size or shape.
type limitError struct{ msg string }

func (e *limitError) Error() string { return e.msg }
func (e *limitError) Unwrap() error { return errXLSXLimit }

func overLimit(format string, args ...any) error {
	return &limitError{msg: fmt.Sprintf(format, args...)}
}

// xlsxPackage is an opened workbook package.
type xlsxPackage struct {
	zr       *zip.Reader
	files    map[string]*zip.File // by lower-case name
	inflated int64                // bytes inflated so far, all parts
}

// notWorkbookError is a file that is not a readable .xlsx workbook: what
// it seems to be instead and what to do.
type notWorkbookError struct{ msg string }

func (e *notWorkbookError) Error() string { return e.msg }

func notXLSX(what string) error {
	return &notWorkbookError{msg: "not an XLSX workbook (" + what + "): save it from the spreadsheet as Excel Workbook (.xlsx), or as CSV UTF-8 and name it .csv"}
}

// cfbMagic starts a Compound File (an .xls workbook, or an encrypted
// .xlsx); zipMagic a ZIP archive.
var (
	cfbMagic = []byte{0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1}
	zipMagic = []byte("PK\x03\x04")
)

// readerAt gives random access to the workbook in r: r itself from its
// current offset when it can seek, else its bytes read into memory, at most
// XLSXMaxFileBytes.
func readerAt(r io.Reader) (io.ReaderAt, int64, error) {
	if f, ok := r.(interface {
		io.ReaderAt
		io.Seeker
	}); ok {
		cur, err := f.Seek(0, io.SeekCurrent)
		if err != nil {
			return nil, 0, err
		}
		end, err := f.Seek(0, io.SeekEnd)
		if err != nil {
			return nil, 0, err
		}
		if _, err := f.Seek(cur, io.SeekStart); err != nil {
			return nil, 0, err
		}
		return io.NewSectionReader(f, cur, end-cur), end - cur, nil
	}
	data, err := io.ReadAll(io.LimitReader(r, XLSXMaxFileBytes+1))
	if err != nil {
		return nil, 0, err
	}
	if len(data) > XLSXMaxFileBytes {
		return nil, 0, overLimit("the workbook is over %d MiB: save it as CSV, or split it", XLSXMaxFileBytes>>20)
	}
	return bytes.NewReader(data), int64(len(data)), nil
}

// openPackage opens the workbook in r: through io.ReaderAt when r is a
// file (nothing read into memory), else read whole up to
// XLSXMaxFileBytes.
func openPackage(r io.Reader) (*xlsxPackage, error) {
	ra, size, err := readerAt(r)
	if err != nil {
		return nil, err
	}
	head := make([]byte, 8)
	n, _ := ra.ReadAt(head, 0)
	head = head[:n]
	switch {
	case n == 0:
		return nil, notXLSX("the file is empty")
	case bytes.HasPrefix(head, cfbMagic):
		if isEncrypted(ra, size) {
			return nil, notXLSX("it is protected by a password (an encrypted workbook): save it without a password")
		}
		return nil, notXLSX("an old Excel 97-2003 .xls workbook")
	case !bytes.HasPrefix(head, zipMagic):
		return nil, notXLSX("not a ZIP package, as an .xlsx file is")
	}
	zr, err := zip.NewReader(ra, size)
	if err != nil {
		return nil, notXLSX("a damaged or truncated ZIP package: " + err.Error())
	}
	p := &xlsxPackage{zr: zr, files: make(map[string]*zip.File, len(zr.File))}
	for _, f := range zr.File {
		name := strings.ToLower(strings.TrimPrefix(strings.ReplaceAll(f.Name, "\\", "/"), "/"))
		if _, dup := p.files[name]; !dup {
			p.files[name] = f
		}
	}
	if p.files["xl/workbook.xml"] == nil && p.workbookPart() == "" {
		return nil, p.whatInstead()
	}
	return p, nil
}

// isEncrypted looks for the EncryptionInfo stream name of an encrypted
// OOXML package in the first directory sectors of a Compound File.
func isEncrypted(ra io.ReaderAt, size int64) bool {
	buf := make([]byte, min(size, 64<<10))
	n, _ := ra.ReadAt(buf, 0)
	var name []byte
	for _, c := range "EncryptionInfo" {
		name = append(name, byte(c), 0)
	}
	return bytes.Contains(buf[:n], name)
}

// whatInstead names what a ZIP package without a workbook is.
func (p *xlsxPackage) whatInstead() error {
	if f := p.files["mimetype"]; f != nil && f.UncompressedSize64 < 256 {
		if b, err := p.readSmall(f); err == nil {
			switch mt := strings.TrimSpace(string(b)); {
			case strings.Contains(mt, "opendocument.spreadsheet"):
				return &notWorkbookError{msg: "an OpenDocument spreadsheet (.ods), not an XLSX workbook: in LibreOffice Calc use File > Save As and choose Excel 2007-365 (.xlsx), or Text CSV (UTF-8), and load that file"}
			case strings.HasPrefix(mt, "application/"):
				return notXLSX("a ZIP package of type " + strconv.Quote(mt))
			}
		}
	}
	switch {
	case p.files["content.xml"] != nil:
		return &notWorkbookError{msg: "an OpenDocument file, not an XLSX workbook: save it as Excel 2007-365 (.xlsx), or as Text CSV (UTF-8)"}
	case p.files["word/document.xml"] != nil:
		return notXLSX("a Word document")
	}
	return notXLSX("a ZIP archive without a workbook in it")
}

func (p *xlsxPackage) readSmall(f *zip.File) ([]byte, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(io.LimitReader(rc, 4096))
}

// workbookPart is the workbook's part named by the package relationships,
// "" if none.
func (p *xlsxPackage) workbookPart() string {
	rels, err := p.rels("_rels/.rels")
	if err != nil {
		return ""
	}
	for _, r := range rels {
		if strings.HasSuffix(r.typ, "/officeDocument") {
			return partPath("", r.target)
		}
	}
	return ""
}

// partPath resolves a relationship target against the folder of the part
// holding the relationship.
func partPath(dir, target string) string {
	if strings.HasPrefix(target, "/") {
		return strings.ToLower(strings.TrimPrefix(target, "/"))
	}
	return strings.ToLower(path.Join(dir, target))
}

// open opens a part for reading through the bounds: the inflated bytes
// are counted against XLSXMaxInflated (the declared size is checked first,
// and archive/zip holds a part to its declared size), and the XML through
// xmlGuard.
func (p *xlsxPackage) open(name string) (*xml.Decoder, io.Closer, error) {
	f := p.files[strings.ToLower(name)]
	if f == nil {
		return nil, nil, fs404(name)
	}
	if f.UncompressedSize64 > XLSXMaxInflated || int64(f.UncompressedSize64) > XLSXMaxInflated-p.inflated {
		return nil, nil, overLimit("its part %s unzips to %d MiB, over the %d MiB read of a workbook at most (a zip bomb, or a sheet too big for a workbook: save it as CSV)", f.Name, f.UncompressedSize64>>20, XLSXMaxInflated>>20)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, nil, notXLSX("a damaged ZIP package: " + err.Error())
	}
	g := &xmlGuard{r: &countingReader{r: rc, p: p, name: f.Name}, max: XLSXMaxToken}
	d := xml.NewDecoder(g)
	d.Strict = true
	return d, rc, nil
}

// fs404 is a part missing from the package.
func fs404(name string) error { return notXLSX("no part " + name + " in the package") }

// countingReader counts inflated bytes against the package's bound.
type countingReader struct {
	r    io.Reader
	p    *xlsxPackage
	name string
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.p.inflated += int64(n)
	if c.p.inflated > XLSXMaxInflated {
		return n, overLimit("its parts unzip to more than %d MiB (a zip bomb, or a sheet too big for a workbook: save it as CSV)", XLSXMaxInflated>>20)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		err = notXLSX("a damaged ZIP package: " + c.name + ": " + err.Error())
	}
	return n, err
}

// xmlGuard passes XML through, refusing what encoding/xml would gather
// without bound or a spreadsheet never writes: a run of more than max
// bytes without a '<' (text, whitespace or a tag), and any "<!" (a DTD,
// an entity declaration, a comment, a CDATA section). A processing
// instruction ("<?xml ...?>") is bounded likewise.
type xmlGuard struct {
	r      io.Reader
	max    int
	run    int  // bytes since the last '<'
	lt     bool // the last byte was '<'
	inPI   bool // inside "<? ... ?>"
	qmark  bool // inside a PI, the last byte was '?'
	failed error
}

func (g *xmlGuard) Read(b []byte) (int, error) {
	if g.failed != nil {
		return 0, g.failed
	}
	n, err := g.r.Read(b)
	for i, c := range b[:n] {
		g.run++
		switch {
		case g.lt && c == '!':
			g.failed = overLimit("its XML has a DTD, an entity, a comment or a CDATA section, which a spreadsheet does not write")
		case g.lt && c == '?':
			g.inPI = true
		case g.inPI:
			if g.qmark && c == '>' {
				g.inPI = false
			}
			g.qmark = c == '?'
		case c == '<':
			g.run = 0
		}
		g.lt = c == '<' && !g.inPI
		if g.failed == nil && g.run > g.max {
			g.failed = overLimit("its XML has a run of more than %d KiB of text or whitespace in one piece (a zip bomb?); a cell holds at most 32767 characters", g.max>>10)
		}
		if g.failed != nil {
			return i, g.failed
		}
	}
	return n, err
}

// rel is one relationship of a part.
type rel struct{ id, typ, target string }

// rels reads a relationships part.
func (p *xlsxPackage) rels(name string) ([]rel, error) {
	d, c, err := p.open(name)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var out []rel
	for {
		tok, err := d.RawToken()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, partErr(name, err)
		}
		if el, ok := tok.(xml.StartElement); ok && el.Name.Local == "Relationship" {
			if len(out) >= xlsxMaxSheets*4 {
				return nil, overLimit("%s lists more than %d relationships", name, xlsxMaxSheets*4)
			}
			out = append(out, rel{id: attr(el, "Id"), typ: attr(el, "Type"), target: attr(el, "Target")})
		}
	}
}

// partErr classifies an error met reading part name: a bound is said as
// is, a syntax error names the part.
func partErr(name string, err error) error {
	var le *limitError
	var nw *notWorkbookError
	if errors.As(err, &le) || errors.As(err, &nw) {
		return err
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return notXLSX(name + " is cut short")
	}
	var se *xml.SyntaxError
	if errors.As(err, &se) {
		return notXLSX(fmt.Sprintf("%s is not well-formed XML (line %d: %s)", name, se.Line, se.Msg))
	}
	// Reading errors became one of the above in countingReader: what is
	// left is the decoder's ("xml: unsupported version").
	return notXLSX(fmt.Sprintf("%s is not XML a spreadsheet writes (%v)", name, err))
}

func attr(el xml.StartElement, name string) string {
	for _, a := range el.Attr {
		if a.Name.Local == name && a.Name.Space == "" {
			return a.Value
		}
	}
	return ""
}

// nsAttr is an attribute in a namespace (r:id), whatever its prefix.
func nsAttr(el xml.StartElement, name string) string {
	for _, a := range el.Attr {
		if a.Name.Local == name && a.Name.Space != "" {
			return a.Value
		}
	}
	return ""
}

// sheetInfo is a sheet listed by the workbook.
type sheetInfo struct {
	name   string
	part   string
	hidden bool // state="hidden" or "veryHidden"
	// filter is the autofilter's range of rows (from _xlnm._FilterDatabase),
	// 0 0 when the sheet has none.
	filterFrom, filterTo int
}

// bookInfo is what is read of a workbook before its sheet.
type bookInfo struct {
	sheets  []sheetInfo
	shared  *sharedStrings
	formats *cellFormats
}

// readBook reads the workbook part, its relationships, the styles and the
// shared strings.
func (p *xlsxPackage) readBook() (*bookInfo, error) {
	wbPart := p.workbookPart()
	if wbPart == "" {
		wbPart = "xl/workbook.xml"
	}
	parts, err := p.readBookParts(wbPart)
	if err != nil {
		return nil, err
	}
	b := &bookInfo{}
	if b.sheets, err = p.readSheets(wbPart, parts.byID); err != nil {
		return nil, err
	}
	if len(b.sheets) == 0 {
		return nil, notXLSX("it has no sheet")
	}
	if b.formats, err = p.readStyles(parts.styles); err != nil {
		return nil, err
	}
	if b.shared, err = p.readShared(parts.shared); err != nil {
		return nil, err
	}
	return b, nil
}

// bookParts are the parts the workbook part's relationships name.
type bookParts struct {
	byID   map[string]string // the part of each relationship id
	shared string            // the shared strings, "" if none
	styles string            // the styles, "" if none
}

// readBookParts reads the relationships of the workbook part wbPart.
func (p *xlsxPackage) readBookParts(wbPart string) (bookParts, error) {
	dir := path.Dir(wbPart)
	rels, err := p.rels(path.Join(dir, "_rels", path.Base(wbPart)+".rels"))
	if err != nil {
		return bookParts{}, err
	}
	bp := bookParts{byID: make(map[string]string, len(rels))}
	for _, r := range rels {
		bp.byID[r.id] = partPath(dir, r.target)
		switch {
		case strings.HasSuffix(r.typ, "/sharedStrings"):
			bp.shared = partPath(dir, r.target)
		case strings.HasSuffix(r.typ, "/styles"):
			bp.styles = partPath(dir, r.target)
		}
	}
	return bp, nil
}

// readSheets reads the sheets the workbook part wbPart lists, each with
// its part (byID, by relationship id) and its autofilter's rows (the
// defined name _xlnm._FilterDatabase local to it).
func (p *xlsxPackage) readSheets(wbPart string, byID map[string]string) ([]sheetInfo, error) {
	d, c, err := p.open(wbPart)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var sheets []sheetInfo
	filters := map[int][2]int{}
	inName, nameLocal, nameFilter := false, -1, false
	var nameText strings.Builder
	for {
		tok, err := d.RawToken()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, partErr(wbPart, err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			switch el.Name.Local {
			case "sheet":
				if len(sheets) >= xlsxMaxSheets {
					return nil, overLimit("it has more than %d sheets", xlsxMaxSheets)
				}
				st := attr(el, "state")
				sheets = append(sheets, sheetInfo{name: attr(el, "name"), part: byID[nsAttr(el, "id")],
					hidden: st == "hidden" || st == "veryHidden"})
			case "definedName":
				inName, nameLocal = true, -1
				nameFilter = attr(el, "name") == "_xlnm._FilterDatabase"
				if v, err := strconv.Atoi(attr(el, "localSheetId")); err == nil {
					nameLocal = v
				}
				nameText.Reset()
			}
		case xml.CharData:
			if inName && nameFilter && nameText.Len() < 4096 {
				nameText.Write(el)
			}
		case xml.EndElement:
			if el.Name.Local == "definedName" {
				if nameFilter && nameLocal >= 0 {
					if from, to, ok := rowRange(nameText.String()); ok {
						filters[nameLocal] = [2]int{from, to}
					}
				}
				inName = false
			}
		}
	}
	for i, r := range filters {
		if i < len(sheets) {
			sheets[i].filterFrom, sheets[i].filterTo = r[0], r[1]
		}
	}
	return sheets, nil
}

// rowRange reads the rows of a range such as "Sheet1!$A$1:$D$10" or
// "'My sheet'!$A$1:$D$10".
func rowRange(ref string) (from, to int, ok bool) {
	if i := strings.LastIndexByte(ref, '!'); i >= 0 {
		ref = ref[i+1:]
	}
	a, b, found := strings.Cut(ref, ":")
	if !found {
		b = a
	}
	rowOf := func(s string) int {
		s = strings.TrimLeft(strings.ReplaceAll(s, "$", ""), "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
		n, err := strconv.Atoi(s)
		if err != nil {
			return 0
		}
		return n
	}
	from, to = rowOf(a), rowOf(b)
	return from, to, from > 0 && to >= from
}

// sharedStrings is the shared string table: the texts in chunks of
// sstChunk bytes (no text crosses a chunk; growing one buffer by doubling
// would hold twice the table at times), and each entry's place.
type sharedStrings struct {
	chunks  [][]byte
	entries []uint64 // chunk<<48 | offset<<24 | length
}

const sstChunk = 4 << 20

func (s *sharedStrings) get(i int) (string, bool) {
	if s == nil || i < 0 || i >= len(s.entries) {
		return "", false
	}
	e := s.entries[i]
	c, off, n := e>>48, e>>24&(1<<24-1), e&(1<<24-1)
	return string(s.chunks[c][off : off+n]), true
}

func (s *sharedStrings) add(text []byte) {
	last := len(s.chunks) - 1
	if last < 0 || len(s.chunks[last])+len(text) > cap(s.chunks[last]) {
		// Chunks of 4 KiB, doubling up to sstChunk: a small table
		// takes little.
		size := 4 << 10
		if last >= 0 {
			size = min(2*cap(s.chunks[last]), sstChunk)
		}
		s.chunks = append(s.chunks, make([]byte, 0, max(size, len(text))))
		last++
	}
	off := len(s.chunks[last])
	s.chunks[last] = append(s.chunks[last], text...)
	s.entries = append(s.entries, uint64(last)<<48|uint64(off)<<24|uint64(len(text)))
}

// readShared reads the shared strings: each entry's text runs (<t>),
// leaving out phonetic runs (<rPh>).
func (p *xlsxPackage) readShared(name string) (*sharedStrings, error) {
	s := &sharedStrings{}
	if name == "" || p.files[name] == nil {
		return s, nil
	}
	d, c, err := p.open(name)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	inT, inPh, total := false, 0, 0
	var cur []byte
	for {
		tok, err := d.RawToken()
		if err == io.EOF {
			return s, nil
		}
		if err != nil {
			return nil, partErr(name, err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			switch el.Name.Local {
			case "sst":
				// Room for the entries it declares, up to 64Ki.
				if n, err := strconv.Atoi(attr(el, "uniqueCount")); err == nil && n > 0 {
					s.entries = make([]uint64, 0, min(n, 1<<16))
				}
			case "si":
				if len(s.entries) >= XLSXMaxSharedStrings {
					return nil, overLimit("its shared string table has more than %d entries", XLSXMaxSharedStrings)
				}
				cur = cur[:0]
			case "t":
				inT = true
			case "rPh":
				inPh++
			}
		case xml.EndElement:
			switch el.Name.Local {
			case "si":
				s.add(cur)
			case "t":
				inT = false
			case "rPh":
				inPh--
			}
		case xml.CharData:
			if inT && inPh == 0 {
				if cur, err = appendShared(cur, el, &total); err != nil {
					return nil, err
				}
			}
		}
	}
}

// appendShared appends text to the shared string entry being read, cur,
// within the limits on an entry and on the table (*total counts the
// table's text so far).
func appendShared(cur, text []byte, total *int) ([]byte, error) {
	*total += len(text)
	if *total > XLSXMaxSharedBytes {
		return nil, overLimit("its shared string table holds more than %d MiB of text", XLSXMaxSharedBytes>>20)
	}
	if len(cur)+len(text) > XLSXMaxToken {
		return nil, overLimit("its shared string table has an entry of more than %d KiB", XLSXMaxToken>>10)
	}
	return append(cur, text...), nil
}

// cellFormats maps a cell's style index (s) to its number format code.
type cellFormats struct {
	codes map[int]string // custom number formats by id
	xfs   []int          // number format id of each cell format
}

// code returns the number format code of style index s, and whether it is
// known.
func (f *cellFormats) code(s int) (string, bool) {
	id := 0
	if f != nil && s >= 0 && s < len(f.xfs) {
		id = f.xfs[s]
	}
	if f != nil {
		if c, ok := f.codes[id]; ok {
			return c, true
		}
	}
	c, ok := builtinFormats[id]
	return c, ok
}

func (p *xlsxPackage) readStyles(name string) (*cellFormats, error) {
	f := &cellFormats{codes: map[int]string{}}
	if name == "" || p.files[name] == nil {
		return f, nil
	}
	d, c, err := p.open(name)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	inXfs := false
	for {
		tok, err := d.RawToken()
		if err == io.EOF {
			return f, nil
		}
		if err != nil {
			return nil, partErr(name, err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			switch el.Name.Local {
			case "numFmt":
				if len(f.codes) >= xlsxMaxStyles {
					return nil, overLimit("it has more than %d number formats", xlsxMaxStyles)
				}
				if id, err := strconv.Atoi(attr(el, "numFmtId")); err == nil {
					f.codes[id] = attr(el, "formatCode")
				}
			case "cellXfs":
				inXfs = true
			case "xf":
				if inXfs {
					if len(f.xfs) >= xlsxMaxStyles {
						return nil, overLimit("it has more than %d cell formats", xlsxMaxStyles)
					}
					id, _ := strconv.Atoi(attr(el, "numFmtId"))
					f.xfs = append(f.xfs, id)
				}
			}
		case xml.EndElement:
			if el.Name.Local == "cellXfs" {
				inXfs = false
			}
		}
	}
}
