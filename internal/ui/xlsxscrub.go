package ui

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/acme/payout/internal/card"
)

// xlsxType is the media type of a workbook.
const xlsxType = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"

// xlsxText matches the text of a cell (an inline string or a shared
// string: <t>…</t> or <t xml:space="preserve">…</t>) in a part of a
// workbook. Numbers (<v>) and markup are left alone: masking them would
// change an amount or break the file.
var xlsxText = regexp.MustCompile(`(<t(?:\s[^>]*)?>)([^<]*)(</t>)`)

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

// scrubText masks card-like numbers in the cell texts of one XML part.
func scrubText(part []byte) []byte {
	return xlsxText.ReplaceAllFunc(part, func(m []byte) []byte {
		sub := xlsxText.FindSubmatch(m)
		text := string(sub[2])
		if s := card.Scrub(text); s != text {
			return append(append(append([]byte{}, sub[1]...), s...), sub[3]...)
		}
		return m
	})
}
