// Package hostile writes hostile workbooks for the tests of the payout
// file readers: zip bombs of whitespace, a text node or shared strings
// that inflate to hundreds of megabytes, millions of empty cells, a DTD
// with entities, a truncated or lying ZIP, an .ods or .xls under an .xlsx
// name. Each Case says which words the refusal must contain.
package hostile

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
)

// Case is one hostile workbook.
type Case struct {
	Name string
	Data []byte
	// Want is a part of the refusal's message.
	Want string
	// Inflated is about how many bytes the workbook's parts unzip to.
	Inflated int64
}

const contentTypes = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/></Types>`

const rootRels = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>`

const workbookXML = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="Sheet1" sheetId="1" r:id="rId1"/></sheets></workbook>`

const workbookRels = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/><Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings" Target="sharedStrings.xml"/></Relationships>`

// SheetHead and SheetTail wrap a sheet's rows.
const (
	SheetHead = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>`
	SheetTail = `</sheetData></worksheet>`
)

// header and a valid row, inline strings.
const goodRows = `<row r="1"><c r="A1" t="inlineStr"><is><t>externalId</t></is></c><c r="B1" t="inlineStr"><is><t>amount</t></is></c><c r="C1" t="inlineStr"><is><t>telecomOperator</t></is></c></row>` +
	`<row r="2"><c r="A2" t="inlineStr"><is><t>PO-1</t></is></c><c r="B2"><v>10</v></c><c r="C2" t="inlineStr"><is><t>MTS</t></is></c></row>`

// part is one file of a package: its content as pieces, repeated pieces
// written n times without being held.
type part struct {
	name   string
	pieces []piece
	// declare, if not 0, is the uncompressed size written in the ZIP
	// headers instead of the true one.
	declare uint64
}

type piece struct {
	s string
	n int
}

func one(s string) piece         { return piece{s, 1} }
func many(s string, n int) piece { return piece{s, n} }

// Workbook writes a package of the standard parts and the given sheet
// (and sharedStrings.xml if shared is not nil).
func workbook(sheet []piece, shared []piece, declare uint64) []byte {
	parts := []part{
		{name: "[Content_Types].xml", pieces: []piece{one(contentTypes)}},
		{name: "_rels/.rels", pieces: []piece{one(rootRels)}},
		{name: "xl/workbook.xml", pieces: []piece{one(workbookXML)}},
		{name: "xl/_rels/workbook.xml.rels", pieces: []piece{one(workbookRels)}},
		{name: "xl/worksheets/sheet1.xml", pieces: sheet, declare: declare},
	}
	if shared != nil {
		parts = append(parts, part{name: "xl/sharedStrings.xml", pieces: shared})
	}
	return writeZip(parts)
}

// writeZip deflates each part itself (so that its headers can lie).
func writeZip(parts []part) []byte {
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	for _, p := range parts {
		var comp bytes.Buffer
		fw, _ := flate.NewWriter(&comp, flate.BestSpeed)
		crc := crc32.NewIEEE()
		w := io.MultiWriter(fw, crc)
		var size uint64
		for _, pc := range p.pieces {
			chunk := pc.s
			n := pc.n
			// Write repeated short pieces in blocks of about 1 MiB.
			if len(pc.s) < 1<<20 && n > 1 {
				k := max(1, (1<<20)/len(pc.s))
				k = min(k, n)
				block := strings.Repeat(pc.s, k)
				for n >= k {
					io.WriteString(w, block)
					size += uint64(len(block))
					n -= k
				}
			}
			for ; n > 0; n-- {
				io.WriteString(w, chunk)
				size += uint64(len(chunk))
			}
		}
		fw.Close()
		h := &zip.FileHeader{Name: p.name, Method: zip.Deflate, CRC32: crc.Sum32(),
			CompressedSize64: uint64(comp.Len()), UncompressedSize64: size}
		if p.declare != 0 {
			h.UncompressedSize64 = p.declare
		}
		raw, err := zw.CreateRaw(h)
		if err != nil {
			panic(err)
		}
		raw.Write(comp.Bytes())
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return out.Bytes()
}

// Good is a small valid workbook of one payout row (PO-1, 10, MTS).
func Good() []byte {
	return workbook([]piece{one(SheetHead), one(goodRows), one(SheetTail)}, nil, 0)
}

const mib = 1 << 20

// Cases returns the hostile workbooks. Generating them takes a few
// seconds (some deflate hundreds of megabytes).
func Cases() []Case {
	spaces := strings.Repeat(" ", 1<<16)
	var cs []Case
	add := func(name, want string, inflated int64, data []byte) {
		cs = append(cs, Case{Name: name, Data: data, Want: want, Inflated: inflated})
	}
	// The bomb: a sheet of 512 MiB of whitespace (about 0.5 MB
	// zipped), its size declared.
	add("whitespace-bomb-512MiB", "unzips to 512 MiB", 512*mib, workbook([]piece{
		one(SheetHead), many(spaces, 512*mib/len(spaces)), one(goodRows), one(SheetTail)}, nil, 0))
	// 1 GiB of whitespace declared as 1 MiB: archive/zip holds the part
	// to its declared size, the guard to 1 MiB a run.
	add("whitespace-bomb-lying-size", "damaged ZIP package", 1024*mib, workbook([]piece{
		one(SheetHead), many(spaces, 1024*mib/len(spaces)), one(goodRows), one(SheetTail)}, nil, 1<<20))
	// Whitespace under the inflated bound, between rows.
	add("whitespace-run-200MiB", "text or whitespace in one piece", 200*mib, workbook([]piece{
		one(SheetHead), one(goodRows), many(spaces, 200*mib/len(spaces)), one(SheetTail)}, nil, 0))
	// One text node of 200 MiB.
	add("text-node-200MiB", "text or whitespace in one piece", 200*mib, workbook([]piece{
		one(SheetHead), one(goodRows), one(`<row r="3"><c r="A3" t="inlineStr"><is><t>`),
		many(strings.Repeat("A", 1<<16), 200*mib/(1<<16)), one(`</t></is></c></row>`), one(SheetTail)}, nil, 0))
	// Huge shared string tables: many entries; much text.
	sstHead := `<?xml version="1.0" encoding="UTF-8"?><sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">`
	add("shared-strings-2M-entries", "more than 1048576 entries", 2_000_000*18, workbook([]piece{one(SheetHead), one(goodRows), one(SheetTail)},
		[]piece{one(sstHead), many("<si><t>a</t></si>", 2_000_000), one("</sst>")}, 0))
	big := "<si><t>" + strings.Repeat("B", 1000<<10) + "</t></si>"
	add("shared-strings-200MiB-text", "more than 32 MiB of text", 200*mib, workbook([]piece{one(SheetHead), one(goodRows), one(SheetTail)},
		[]piece{one(sstHead), many(big, 200), one("</sst>")}, 0))
	// Millions of empty cells, and of empty rows.
	add("empty-cells-one-row", "more than 16384 columns", 10_000_000*4, workbook([]piece{
		one(SheetHead), one(goodRows), one(`<row r="3">`), many("<c/>", 10_000_000), one(`</row>`), one(SheetTail)}, nil, 0))
	add("empty-cells-5M", "more than 4194304 cells", 5_000_000*4, workbook([]piece{
		one(SheetHead), one(goodRows), many("<row>"+strings.Repeat("<c/>", 10_000)+"</row>", 500), one(SheetTail)}, nil, 0))
	rows := make([]byte, 0, 2_000_000*8)
	for i := 3; i < 2_000_003; i++ {
		rows = fmt.Appendf(rows, `<row r="%d"/>`, i)
	}
	add("empty-rows-2M", "more than 1048576 rows", int64(len(rows)), workbook([]piece{
		one(SheetHead), one(goodRows), one(string(rows)), one(SheetTail)}, nil, 0))
	// Billion laughs.
	laughs := `<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;"><!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;"><!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;"><!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;"><!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;"><!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;"><!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;"><!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">]>`
	add("dtd-entities", "DTD", 1<<10, workbook([]piece{one(laughs),
		one(strings.TrimPrefix(SheetHead, `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>`+"\n")),
		one(`<row r="1"><c r="A1" t="inlineStr"><is><t>&lol9;</t></is></c></row>`), one(SheetTail)}, nil, 0))
	good := Good()
	add("truncated-zip", "truncated", 0, good[:len(good)/2])
	add("ods-renamed", "OpenDocument spreadsheet (.ods)", 0, writeZip([]part{
		{name: "mimetype", pieces: []piece{one("application/vnd.oasis.opendocument.spreadsheet")}},
		{name: "content.xml", pieces: []piece{one(`<?xml version="1.0"?><office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"/>`)}},
	}))
	add("xls-renamed", ".xls workbook", 0, append([]byte{0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1}, make([]byte, 4096)...))
	return cs
}
