package payfile

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/acme/payout/internal/card"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/psp"
)

// validate checks one record and reports each of its problems to emit. ok
// tells whether the row is valid; idOK whether its externalId is well formed
// (it then takes part in the duplicate search even if the row has other
// problems).
func (c *config) validate(rec *record, emit func(Error)) (row Row, ok, idOK bool) {
	if rec.Problem != "" {
		emit(rec.at(Error{Line: rec.Line, Column: ColumnRow, Kind: KindStructure, Message: rec.Problem}))
		return Row{Line: rec.Line}, false, false
	}
	v := rowCheck{c: c, rec: rec, emit: emit, ok: true}
	v.row.Line = rec.Line
	// A workbook's cells that could not be taken as text are reported in
	// column order, and their columns not checked further.
	for _, e := range rec.cellErrs {
		v.ok = false
		emit(rec.at(e))
	}
	v.externalID()
	v.amount()
	v.destination()
	v.extras()
	if !v.ok {
		return Row{Line: rec.Line, ExternalID: v.row.ExternalID}, false, v.idOK
	}
	return v.row, true, v.idOK
}

// rowCheck is the state of validate: the row taken from the record so
// far, and whether it is valid.
type rowCheck struct {
	c    *config
	rec  *record
	emit func(Error)
	row  Row
	ok   bool
	idOK bool
}

// bad reports a problem of the record's field col (or ColumnRow).
func (v *rowCheck) bad(col, msg string) {
	v.ok = false
	v.emit(v.rec.at(Error{Line: v.rec.Line, Column: col, Kind: KindField, Message: msg}))
}

// externalID checks the externalId. A card number outside cardNumber
// refuses its field first, so that no other message quotes it.
func (v *rowCheck) externalID() {
	if v.rec.cellBad(ColExternalID) {
		return
	}
	id := v.rec.ExternalID
	if msg := v.c.cardProblem(ColExternalID, id); msg != "" {
		v.bad(ColExternalID, msg)
	} else if msg := v.c.externalIDProblem(id); msg != "" {
		v.bad(ColExternalID, msg)
	} else {
		v.row.ExternalID, v.idOK = id, true
	}
}

// amount checks the amount. A number in scientific notation, as a
// spreadsheet exports a long number to CSV, is named as such before any
// message that masks or quotes it (a workbook's text cells are caught in
// textOfCell).
func (v *rowCheck) amount() {
	if v.rec.cellBad(ColAmount) {
		return
	}
	c, s := v.c, v.rec.Amount
	amounts := c.amounts
	if v.rec.amountPlain {
		amounts = money.Plain
	}
	if isScientific(s) {
		v.bad(ColAmount, sciMessage(ColAmount, s))
	} else if msg := c.cardProblem(ColAmount, s); msg != "" {
		v.bad(ColAmount, msg)
	} else if a, err := money.ParseIn(s, c.scale, amounts); err != nil {
		v.bad(ColAmount, c.amountMessage(s, err))
	} else if c.hasMax && a.Cmp(c.max) > 0 {
		v.bad(ColAmount, fmt.Sprintf("%q is above the maximum %s", s, c.max.StringFixed(c.scale)))
	} else {
		v.row.Amount = a
	}
}

// destination checks that the record has exactly one destination, and
// checks it.
func (v *rowCheck) destination() {
	rec := v.rec
	hasCard, hasTel := rec.CardNumber != "" || rec.cellBad(ColCardNumber), rec.Telecom != "" || rec.cellBad(ColTelecomOperator)
	switch {
	case hasCard && hasTel:
		v.bad(ColumnRow, fmt.Sprintf("has both a %s and a %s: give exactly one destination", ColCardNumber, ColTelecomOperator))
	case !hasCard && !hasTel && totalLabel(rec.ExternalID):
		v.bad(ColumnRow, fmt.Sprintf("has no destination and %s %q: a total row, not a payout; delete it (keep totals out of the payout rows, and give the expected total with --expect-total)", ColExternalID, rec.ExternalID))
	case !hasCard && !hasTel:
		v.bad(ColumnRow, fmt.Sprintf("has no destination: give a %s or a %s", ColCardNumber, ColTelecomOperator))
	}
	if hasCard && !rec.cellBad(ColCardNumber) {
		v.cardNumber()
	}
	if hasTel && !rec.cellBad(ColTelecomOperator) {
		v.telecom()
	}
}

// cardNumber checks the card number.
func (v *rowCheck) cardNumber() {
	if isScientific(v.rec.CardNumber) {
		v.bad(ColCardNumber, sciMessage(ColCardNumber, v.rec.CardNumber))
	} else if digits, err := card.Normalize(v.rec.CardNumber); err != nil {
		v.bad(ColCardNumber, cardMessage(err))
	} else {
		v.row.CardNumber = digits
	}
}

// telecom checks the telecom operator.
func (v *rowCheck) telecom() {
	tel := v.rec.Telecom
	if msg := v.c.cardProblem(ColTelecomOperator, tel); msg != "" {
		v.bad(ColTelecomOperator, msg)
	} else if msg := textProblem(tel, true); msg != "" {
		v.bad(ColTelecomOperator, msg)
	} else if msg := v.c.telecom.check(tel); msg != "" {
		v.bad(ColTelecomOperator, msg)
	} else {
		v.row.TelecomOperator = tel
	}
}

// extras checks the extra properties, then takes the informational
// columns (c.extras).
func (v *rowCheck) extras() {
	c, rec := v.c, v.rec
	rest := rec.Extra
	for k, name := range c.extras {
		var val string
		val, rest, _ = strings.Cut(rest, extraSep)
		if val == "" || rec.cellBad(name) {
			continue
		}
		if msg := c.cardProblem(name, val); msg != "" {
			v.bad(name, msg)
			continue
		}
		if msg := textProblem(val, false); msg != "" {
			v.bad(name, msg)
			continue
		}
		if k >= len(c.props) {
			if v.row.Info == nil {
				v.row.Info = make([]string, len(c.extras)-len(c.props))
			}
			v.row.Info[k-len(c.props)] = val
			continue
		}
		if fold(name) == fold(ColBankName) {
			if msg := c.banks.check(val); msg != "" {
				v.bad(name, msg)
				continue
			}
		}
		v.row.Extra = append(v.row.Extra, psp.Property{Key: name, Value: val})
	}
}

// formulaStarts are the first characters that make a spreadsheet treat a
// cell as a formula (CSV injection).
const formulaStarts = "=+-@\t\r"

func (c *config) externalIDProblem(id string) string {
	switch {
	case id == "":
		return "is empty"
	case strings.ContainsRune(formulaStarts, rune(id[0])):
		return fmt.Sprintf("starts with %q, which a spreadsheet would run as a formula", id[:1])
	}
	if msg := textProblem(id, false); msg != "" {
		return msg
	}
	if n := utf8.RuneCountInString(id); n > c.maxID {
		return fmt.Sprintf("is %d characters long, at most %d are allowed", n, c.maxID)
	}
	return ""
}

// textProblem refuses non-printable characters (control characters, line
// breaks, invisible or exotic spaces) and, when formula is set, a formula
// start.
func textProblem(s string, formula bool) string {
	if formula && s != "" && strings.ContainsRune(formulaStarts, rune(s[0])) {
		return fmt.Sprintf("starts with %q, which a spreadsheet would run as a formula", s[:1])
	}
	pos := 0
	for _, r := range s {
		pos++
		if !unicode.IsPrint(r) {
			return fmt.Sprintf("contains the non-printable character %U at position %d", r, pos)
		}
	}
	return ""
}

func (c *config) amountMessage(s string, err error) string {
	var pe *money.ParseError
	switch {
	case s == "":
		return "is empty"
	case errors.As(err, &pe) && c.amounts == money.Plain && looksLocale(s):
		// A locale's amount under the default format: say how to declare it.
		return fmt.Sprintf("%q %s, or declare the file's amount format with --amount-format %s", pe.Input, pe.Reason, localeFormats())
	case errors.As(err, &pe):
		return fmt.Sprintf("%q %s", pe.Input, pe.Reason)
	}
	return fmt.Sprintf("%q is not a valid amount", s)
}

// looksLocale reports whether s is digits grouped or split by a comma or a
// space of some kind, as another locale writes amounts.
func looksLocale(s string) bool {
	if !strings.ContainsAny(s, ", \u00A0\u202F") {
		return false
	}
	digits := strings.Map(func(r rune) rune {
		switch r {
		case ',', '.', ' ', '\u00A0', '\u202F':
			return -1
		}
		return r
	}, s)
	return digits != "" && strings.Trim(digits, "0123456789") == ""
}

// localeFormats lists the amount formats other than plain, for a message:
// "comma (1 500,50), comma-dot (1.500,50) or dot-comma (1,500.50)".
func localeFormats() string {
	var parts []string
	for _, f := range money.Formats {
		if f != money.Plain {
			parts = append(parts, fmt.Sprintf("%s (%s)", f, f.Example()))
		}
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " or " + parts[len(parts)-1]
}

func cardMessage(err error) string {
	var ce *card.Error
	if errors.As(err, &ce) {
		if ce.Masked == "" {
			return ce.Reason
		}
		return ce.Masked + " " + ce.Reason
	}
	return "is not a valid card number"
}

// totalLabel reports whether an externalId is the label of a total row
// ("Total", "Grand total:", "Итого").
func totalLabel(id string) bool {
	switch strings.TrimRight(fold(id), ":.") {
	case "total", "totals", "grandtotal", "subtotal", "sum", "итого", "всего":
		return true
	}
	return false
}
