package ledger

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/acme/payout/internal/scrub"
)

// The ledger is the door of the text people type (notes, reasons, order
// ids, PSP status words, names): each public write that takes one puts it
// through internal/scrub before anything is stored, so that every later
// reader (result and audit files, reports, history, the console, logs,
// webhooks) gets it clean: card numbers masked, no control characters,
// bounded. A text that cannot be stored (too long, a control character)
// is refused with an error matching both ErrBadResolution and
// scrub.ErrRefused, and nothing is written.

// cancelNoteRoom is what a discard adds before the note it passes on to
// each cancelled payout ("interrupted load discarded: ").
const cancelNoteRoom = 40

// typed checks and scrubs one text a person typed for field what, of at
// most max characters.
func typed(what, s string, max int) (string, error) {
	out, err := scrub.Field(what, s, max)
	if err != nil {
		return "", fmt.Errorf("%w: %w", err, ErrBadResolution)
	}
	return out, nil
}

// typedNote checks and scrubs a person's name and note.
func typedNote(by, note string, max int) (string, string, error) {
	by, err := typed("operator name", by, scrub.MaxField)
	if err != nil {
		return "", "", err
	}
	note, err = typed("note", note, max)
	return by, note, err
}

// typedResolution is r with its name and note checked and scrubbed, and
// the order id and PSP status word a person typed.
func typedResolution(r Resolution, orderID, pspStatus string) (Resolution, string, string, error) {
	by, note, err := typedNote(r.By, r.Note, scrub.MaxNote)
	if err != nil {
		return r, "", "", err
	}
	if orderID, err = typed("order id", orderID, scrub.MaxField); err != nil {
		return r, "", "", err
	}
	if pspStatus, err = typed("PSP status", pspStatus, scrub.MaxField); err != nil {
		return r, "", "", err
	}
	r.By, r.Note = by, note
	return r, orderID, pspStatus, nil
}

// confirmedResolution is r with its name and note checked and scrubbed,
// and the order id and status word the PSP confirmed (PSPOrder): the id is
// the PSP's, kept exactly as the PSP gave it (a numeric id that passes the
// Luhn check is no card number, and the outcome checks ask the PSP for
// that very id); it is only refused when it cannot be one (empty, not
// UTF-8, a control character or a space at its ends, over
// scrub.MaxField bytes). The status word is the PSP's text, scrubbed
// as every PSP message is, never refused.
func confirmedResolution(r Resolution, o PSPOrder) (Resolution, string, string, error) {
	by, note, err := typedNote(r.By, r.Note, scrub.MaxNote)
	if err != nil {
		return r, "", "", err
	}
	id := o.OrderID
	bad := id == "" || !utf8.ValidString(id) || len(id) > scrub.MaxField || strings.TrimSpace(id) != id ||
		strings.IndexFunc(id, scrub.Control) >= 0
	if bad {
		return r, "", "", fmt.Errorf("the PSP's order id %q cannot be recorded as one: %w", scrub.Text(id, scrub.MaxField), ErrBadResolution)
	}
	r.By, r.Note = by, note
	return r, id, scrub.Text(o.Status, scrub.MaxField), nil
}
