package ui

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/acme/payout/internal/card"
)

// xlsxType is the media type of a workbook.
const xlsxType = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"

// scrubXLSX is the download's last pass over a workbook: it masks every
// card-like number in the text cells of its sheets and shared strings
// (card.Scrub), as the last pass over a text file does. A workbook with
// nothing to mask is returned as it came; otherwise the parts that
// changed are written again and the others copied as they are.
func scrubXLSX(data []byte) ([]byte, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("workbook: %w", err)
	}
	scrubbed := map[string][]byte{}
	for _, f := range zr.File {
		if !strings.HasPrefix(f.Name, "xl/") || !strings.HasSuffix(f.Name, ".xml") {
			continue
		}
		part, err := readPart(f)
		if err != nil {
			return nil, err
		}
		if out := scrubText(part); !bytes.Equal(out, part) {
			scrubbed[f.Name] = out
		}
	}
	if len(scrubbed) == 0 {
		return data, nil
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range zr.File {
		out, ok := scrubbed[f.Name]
		if !ok {
			if err := zw.Copy(f); err != nil {
				return nil, fmt.Errorf("workbook: %s: %w", f.Name, err)
			}
			continue
		}
		h := f.FileHeader
		h.Method = zip.Deflate
		pw, err := zw.CreateHeader(&h)
		if err != nil {
			return nil, fmt.Errorf("workbook: %s: %w", f.Name, err)
		}
		if _, err := pw.Write(out); err != nil {
			return nil, fmt.Errorf("workbook: %s: %w", f.Name, err)
		}
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("workbook: %w", err)
	}
	return buf.Bytes(), nil
}

// readPart reads one part of a workbook.
func readPart(f *zip.File) ([]byte, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("workbook: %s: %w", f.Name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("workbook: %s: %w", f.Name, err)
	}
	return b, nil
}

// scrubText masks card-like numbers in the cell texts of one XML part:
// the text of each <t>…</t> or <t attributes>…</t> (an inline or shared
// string). Numbers (<v>) and markup are left alone: masking them would
// change an amount or break the file. It returns part itself when nothing
// changed.
func scrubText(part []byte) []byte {
	var out []byte // nil until something changes
	done := 0      // part[:done] is in out
	for i := 0; ; {
		k := bytes.Index(part[i:], []byte("<t"))
		if k < 0 {
			break
		}
		open := i + k + 2
		if open >= len(part) || (part[open] != '>' && !isSpace(part[open])) {
			i = open
			continue
		}
		gt := bytes.IndexByte(part[open:], '>')
		if gt < 0 {
			break
		}
		from := open + gt + 1
		end := bytes.Index(part[from:], []byte("</t>"))
		if end < 0 {
			break
		}
		to := from + end
		if text := part[from:to]; mayHoldCard(text) {
			if s := card.Scrub(string(text)); s != string(text) {
				out = append(append(out, part[done:from]...), s...)
				done = to
			}
		}
		i = to + len("</t>")
	}
	if out == nil {
		return part
	}
	return append(out, part[done:]...)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// mayHoldCard is false when text cannot hold a card number for
// card.Scrub: fewer than card.MinDigits ASCII digits and nothing beyond
// ASCII (digits of other scripts). It spares the Scrub of most cells.
func mayHoldCard(text []byte) bool {
	n := 0
	for _, c := range text {
		switch {
		case c >= 0x80:
			return true
		case c >= '0' && c <= '9':
			n++
		}
	}
	return n >= card.MinDigits
}
