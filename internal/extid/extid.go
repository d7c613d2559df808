// Package extid says when two externalIds are the same id, and how an id
// travels in a URL.
//
// An externalId is compared, and claimed in the ledger, by its key: the id
// in Unicode normalization form C after Unicode case folding. So the
// composed and decomposed spellings of one text (`PO-café-2` typed on a
// Mac or on Windows) and spellings that differ only in case (`PO-Case-3`,
// `po-case-3`) are one id. What is stored per payout and sent to the PSP
// is the id as written; only the comparison uses the key.
//
// An id goes into a PSP URL as one path segment, encoded by PathSegment
// alone; PathProblem refuses, at intake, the ids that a front end in front
// of the PSP could rewrite into another path however they are encoded.
package extid

import (
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// Key returns the form in which externalIds are compared: NFC of the case
// fold of the NFC form. Two ids are the same id exactly when their keys are
// equal. An ASCII id's key is its lower case; an id that is its own key is
// returned as is, without allocating.
func Key(id string) string {
	ascii, lower := true, true
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c >= 0x80 {
			ascii = false
			break
		}
		if 'A' <= c && c <= 'Z' {
			lower = false
		}
	}
	if ascii {
		if lower {
			return id
		}
		b := []byte(id)
		for i, c := range b {
			if 'A' <= c && c <= 'Z' {
				b[i] = c + 'a' - 'A'
			}
		}
		return string(b)
	}
	// A Caser holds state: one per call (Key runs on many goroutines).
	return norm.NFC.String(cases.Fold().String(norm.NFC.String(id)))
}
