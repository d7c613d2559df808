package payfile

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/acme/payout/internal/card"
	"github.com/acme/payout/internal/extid"
	"github.com/acme/payout/internal/money"
)

// validate checks one record and reports each of its problems to emit. ok
// tells whether the row is valid; idOK whether its externalId is well formed
// (it then takes part in the duplicate search even if the row has other
// problems).
func (c *config) validate(rec *record, emit func(Error)) (row Row, ok, idOK bool) {
	row.Line = rec.Line
	if rec.Problem != "" {
		emit(rec.at(Error{Line: rec.Line, Column: ColumnRow, Kind: KindStructure, Message: rec.Problem}))
		return row, false, false
	}
	ok = true
	// bad is passed to the checks below, which only call it: it stays on
	// the stack (a struct holding emit would make the caller's closure
	// escape, an allocation per row).
	bad := func(col, msg string) {
		ok = false
		emit(rec.at(Error{Line: rec.Line, Column: col, Kind: KindField, Message: msg}))
	}
	badLocale := func(col, msg string) {
		ok = false
		emit(rec.at(Error{Line: rec.Line, Column: col, Kind: KindField, Message: msg, LocaleAmount: true}))
	}
	// A workbook's cells that could not be taken as text are reported in
	// column order, and their columns not checked further.
	for _, e := range rec.cellErrs {
		ok = false
		emit(rec.at(e))
	}
	row.ExternalID, idOK = c.checkExternalID(rec, bad)
	row.Amount = c.checkAmount(rec, bad, badLocale)
	row.CardNumber, row.TelecomOperator = c.checkDestination(rec, bad)
	row.Extra, row.Info = c.checkExtras(rec, bad)
	row.PayDate = c.payDateOf(row.Info)
	if !ok {
		return Row{Line: rec.Line, ExternalID: row.ExternalID}, false, idOK
	}
	return row, true, idOK
}

// checkExternalID returns the record's externalId and true if it is well
// formed, else reports its problem to bad. A card number outside
// cardNumber refuses its field first, so that no other message quotes it.
func (c *config) checkExternalID(rec *record, bad func(col, msg string)) (string, bool) {
	if rec.cellBad(ColExternalID) {
		return "", false
	}
	if msg := c.cardProblem(ColExternalID, rec.ExternalID); msg != "" {
		bad(ColExternalID, msg)
	} else if msg := c.externalIDProblem(rec.ExternalID); msg != "" {
		bad(ColExternalID, msg)
	} else {
		return rec.ExternalID, true
	}
	return "", false
}

// checkAmount returns the record's amount if it is valid, else reports its
// problem to bad. A number in scientific notation, as a spreadsheet
// exports a long number to CSV, is named as such before any message that
// masks or quotes it (a workbook's text cells are caught in textOfCell).
// An amount that looks written as another locale writes it, under the
// plain format, goes to badLocale: the caller says once for the file how
// to declare its format (Summary.LocaleAmounts), not on every row.
func (c *config) checkAmount(rec *record, bad, badLocale func(col, msg string)) money.Amount {
	if rec.cellBad(ColAmount) {
		return money.Amount{}
	}
	amounts := c.amounts
	if rec.amountPlain {
		amounts = money.Plain
	}
	if isScientific(rec.Amount) {
		bad(ColAmount, sciMessage(ColAmount, rec.Amount))
	} else if msg := c.cardProblem(ColAmount, rec.Amount); msg != "" {
		bad(ColAmount, msg)
	} else if a, err := money.ParseIn(rec.Amount, c.scale, amounts); err != nil {
		if amounts == money.Plain && looksLocale(rec.Amount) {
			badLocale(ColAmount, c.amountMessage(rec.Amount, err))
		} else {
			bad(ColAmount, c.amountMessage(rec.Amount, err))
		}
	} else if a.Cmp(c.max) > 0 {
		bad(ColAmount, fmt.Sprintf("%q is above the maximum %s", rec.Amount, c.max.StringFixed(c.scale)))
	} else {
		return a
	}
	return money.Amount{}
}

// checkDestination checks that the record has exactly one destination,
// and returns it (the normalized card number, or the telecom operator) if
// it is valid, else reports the problems to bad.
func (c *config) checkDestination(rec *record, bad func(col, msg string)) (cardNumber, telecom string) {
	hasCard, hasTel := rec.CardNumber != "" || rec.cellBad(ColCardNumber), rec.Telecom != "" || rec.cellBad(ColTelecomOperator)
	switch {
	case hasCard && hasTel:
		bad(ColumnRow, fmt.Sprintf("has both a %s and a %s: give exactly one destination", ColCardNumber, ColTelecomOperator))
	case !hasCard && !hasTel && totalLabel(rec.ExternalID):
		bad(ColumnRow, fmt.Sprintf("has no destination and %s %q: a total row, not a payout; delete it (keep totals out of the payout rows, and give the expected total with --expect-total)", ColExternalID, rec.ExternalID))
	case !hasCard && !hasTel:
		bad(ColumnRow, fmt.Sprintf("has no destination: give a %s or a %s", ColCardNumber, ColTelecomOperator))
	}
	if hasCard && !rec.cellBad(ColCardNumber) {
		cardNumber = checkCardNumber(rec.CardNumber, bad)
	}
	if hasTel && !rec.cellBad(ColTelecomOperator) {
		telecom = c.checkTelecom(rec.Telecom, bad)
	}
	return cardNumber, telecom
}

// checkCardNumber returns the digits of the card number s if it is valid,
// else reports its problem to bad.
func checkCardNumber(s string, bad func(col, msg string)) string {
	if isScientific(s) {
		bad(ColCardNumber, sciMessage(ColCardNumber, s))
	} else if digits, err := card.Normalize(s); err != nil {
		bad(ColCardNumber, cardMessage(err))
	} else {
		return digits
	}
	return ""
}

// checkTelecom returns the telecom operator s if it is valid, else reports
// its problem to bad.
func (c *config) checkTelecom(s string, bad func(col, msg string)) string {
	if msg := c.cardProblem(ColTelecomOperator, s); msg != "" {
		bad(ColTelecomOperator, msg)
	} else if msg := textProblem(s, true); msg != "" {
		bad(ColTelecomOperator, msg)
	} else if msg := c.telecom.check(s); msg != "" {
		bad(ColTelecomOperator, msg)
	} else {
		return s
	}
	return ""
}

// checkExtras returns the valid extra properties, then the informational
// columns (c.extras), and reports the problems of the others to bad.
func (c *config) checkExtras(rec *record, bad func(col, msg string)) (extra []Property, info []string) {
	rest := rec.Extra
	for k, name := range c.extras {
		var val string
		val, rest, _ = strings.Cut(rest, extraSep)
		if val == "" || rec.cellBad(name) {
			continue
		}
		if msg := c.cardProblem(name, val); msg != "" {
			bad(name, msg)
			continue
		}
		if msg := textProblem(val, false); msg != "" {
			bad(name, msg)
			continue
		}
		if k >= len(c.props) {
			if info == nil {
				info = make([]string, len(c.extras)-len(c.props))
			}
			info[k-len(c.props)] = val
			continue
		}
		if fold(name) == fold(ColBankName) {
			if msg := c.banks.check(val); msg != "" {
				bad(name, msg)
				continue
			}
		}
		extra = append(extra, Property{Key: name, Value: val})
	}
	return extra, info
}

// payDateOf is the value of the pay date column among a row's
// informational values (info, in the order of c.extras after c.props).
func (c *config) payDateOf(info []string) string {
	if c.payDate == "" {
		return ""
	}
	for k, name := range c.extras[len(c.props):] {
		if k < len(info) && fold(name) == c.payDate {
			return info[k]
		}
	}
	return ""
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
	// The id goes into the PSP's status URL: one that a front end could
	// route elsewhere ("..") would make the PSP's 404 for another path
	// look like the absence of the order, and pay twice.
	if msg := extid.PathProblem(id); msg != "" {
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

// LocaleFormats lists the amount formats other than plain, for a message:
// "comma (1 500,50), comma-dot (1.500,50) or dot-comma (1,500.50)".
func LocaleFormats() string {
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
