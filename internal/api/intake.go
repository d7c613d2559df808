package api

import (
	"bufio"
	"context"
	"encoding/csv"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/acme/payout/internal/payfile"
)

// The intake of a create: the JSON body is read with a streaming decoder
// (jsontext.Decoder over the items array), one item at a time, and
// each item is written as one line of a CSV payout file, so that 15,000
// items cost the memory of one item. Two passes: the first writes each
// item, normalised, as a CSV record to a temporary file and learns the
// union of the info keys (the CSV header needs them first; a record holds
// the info values of the keys known when it was written); the second
// writes the header and copies the records, each padded to the header's
// width. The loader then reads that file as it reads any: line
// N is item N-2.

// createRequest is the create's fields but its items.
type createRequest struct {
	Name        string
	ExpectRows  int
	ExpectTotal string
	ReleaseAt   string
	Items       int
}

// line is one item, normalised: its strings, by CSV column.
type line struct {
	ExternalID, Amount, Card, Telecom, Phone string
	Info                                     map[string]string
}

// maxInfoKeys bounds the info columns of a batch.
const maxInfoKeys = 20

// intake is one create's reading: the request, the problems found before
// the loader sees the file (an item's shape), the info columns.
type intake struct {
	dir      string
	maxItems int
	req      createRequest
	problems []ItemError
	info     []string
	lines    *os.File
	cw       *csv.Writer
	rec      []string
}

// badRequest is a problem of the body as a whole (not JSON, wrong shape).
func badRequest(format string, a ...any) error {
	return newProblem(KindBadRequest, fmt.Sprintf(format, a...))
}

// readCreate reads a create's body into dir/NAME.csv and returns its path.
func readCreate(ctx context.Context, body io.Reader, dir string, maxItems int, defaultName string) (*intake, string, error) {
	in := &intake{dir: dir, maxItems: maxItems}
	var err error
	if in.lines, err = os.CreateTemp(dir, "items-*.csv"); err != nil {
		return nil, "", err
	}
	defer func() { in.lines.Close(); os.Remove(in.lines.Name()) }()
	bw := bufio.NewWriterSize(in.lines, 64<<10)
	in.cw = csv.NewWriter(bw)
	if err := in.decode(ctx, jsontext.NewDecoder(body)); err != nil {
		return nil, "", err
	}
	if in.cw.Flush(); in.cw.Error() != nil {
		return nil, "", in.cw.Error()
	}
	if err := bw.Flush(); err != nil {
		return nil, "", err
	}
	if in.req.Name == "" {
		in.req.Name = defaultName
	}
	path := filepath.Join(dir, in.req.Name+".csv")
	if err := in.writeCSV(path); err != nil {
		return nil, "", err
	}
	return in, path, nil
}

var batchName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// decode reads the top-level object, streaming its items. The decoder
// (jsontext, encoding/json/v2's) refuses what is not strict JSON: a name
// given twice in an object (a field two readers could read two ways),
// invalid UTF-8; its message names where, as a JSON pointer
// ("/items/3/amount").
func (in *intake) decode(ctx context.Context, dec *jsontext.Decoder) error {
	if err := expectDelim(dec, '{'); err != nil {
		return err
	}
	seenItems := false
	for dec.PeekKind() == '"' {
		t, err := dec.ReadToken()
		if err != nil {
			return notJSON(err)
		}
		switch key := t.String(); key {
		case "name":
			err = decodeField(dec, key, &in.req.Name)
			if err == nil && !batchName.MatchString(in.req.Name) {
				err = badRequest("name %q: letters, digits, '.', '_' or '-', at most 100, starting with a letter or digit", in.req.Name)
			}
		case "expectRows":
			err = decodeField(dec, key, &in.req.ExpectRows)
		case "expectTotal":
			err = decodeField(dec, key, &in.req.ExpectTotal)
		case "releaseAt":
			err = decodeField(dec, key, &in.req.ReleaseAt)
		case "items":
			seenItems = true
			err = in.items(ctx, dec)
		default:
			err = badRequest("unknown field %q (name, expectRows, expectTotal, releaseAt, items)", key)
		}
		if err != nil {
			return err
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return err
	}
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		return badRequest("the body holds more than one JSON value")
	}
	if !seenItems || in.req.Items == 0 {
		return badRequest("items: give at least one item")
	}
	return nil
}

// notJSON is the refusal of a body the decoder cannot read.
func notJSON(err error) error {
	return badRequest("the body is not strict JSON (RFC 8259, UTF-8, each name once in an object): %v", err)
}

func expectDelim(dec *jsontext.Decoder, d jsontext.Kind) error {
	t, err := dec.ReadToken()
	if err != nil {
		return notJSON(err)
	}
	if t.Kind() != d {
		return badRequest("expected %q in the body, found %s", d.String(), t.Kind())
	}
	return nil
}

func decodeField(dec *jsontext.Decoder, name string, v any) error {
	raw, err := dec.ReadValue()
	if err != nil {
		return notJSON(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return badRequest("%s: %v", name, err)
	}
	return nil
}

// items reads the items array, one item at a time.
func (in *intake) items(ctx context.Context, dec *jsontext.Decoder) error {
	if dec.PeekKind() != '[' {
		return badRequest("items: want an array")
	}
	if _, err := dec.ReadToken(); err != nil {
		return notJSON(err)
	}
	for dec.PeekKind() != ']' {
		if in.req.Items == in.maxItems {
			return newProblem(KindTooLarge, fmt.Sprintf("items: at most %d items in a batch", in.maxItems))
		}
		if in.req.Items%1000 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		raw, err := dec.ReadValue()
		if err != nil {
			return notJSON(err)
		}
		l, err := in.item(in.req.Items, raw)
		if err != nil {
			return err
		}
		if err := in.write(l); err != nil {
			return err
		}
		in.req.Items++
	}
	if _, err := dec.ReadToken(); err != nil { // ]
		return notJSON(err)
	}
	return nil
}

// write writes l as a record of the first pass: its columns, then its
// info values by the info keys known so far.
func (in *intake) write(l line) error {
	in.rec = append(in.rec[:0], l.ExternalID, l.Amount, l.Card, l.Telecom, l.Phone)
	for _, k := range in.info {
		in.rec = append(in.rec, l.Info[k])
	}
	return in.cw.Write(in.rec)
}

// wireItem is an item as the API documents it: decoded without
// reflection over maps (encoding/json/v2 into a struct, unknown members
// refused). Anything else takes the slow path (itemByFields), which names
// each problem's field.
type wireItem struct {
	ExternalID  string            `json:"externalId"`
	Amount      string            `json:"amount"`
	Destination *wireDestination  `json:"destination"`
	Info        map[string]string `json:"info"`
}

type wireDestination struct {
	CardNumber      string `json:"cardNumber"`
	TelecomOperator string `json:"telecomOperator"`
	PhoneNumber     string `json:"phoneNumber"`
}

// item normalises item i, raw (one JSON value, strict: the decoder read
// it); its shape problems are kept with its index. An item of the
// documented shape is read in one typed decode; any other is read field by
// field for its problems.
func (in *intake) item(i int, raw jsontext.Value) (line, error) {
	var w wireItem
	if json.Unmarshal(raw, &w, json.RejectUnknownMembers(true)) != nil || w.Destination == nil {
		return in.itemByFields(i, raw)
	}
	var l line
	bad := in.badAt(i)
	l.ExternalID = plain(w.ExternalID, "externalId", bad)
	l.Amount = plain(w.Amount, "amount", bad)
	l.Card = plain(w.Destination.CardNumber, "destination.cardNumber", bad)
	l.Telecom = plain(w.Destination.TelecomOperator, "destination.telecomOperator", bad)
	l.Phone = plain(w.Destination.PhoneNumber, "destination.phoneNumber", bad)
	if w.Info != nil {
		l.Info = map[string]string{}
		for _, k := range slices.Sorted(maps.Keys(w.Info)) {
			if in.infoName(k, bad) {
				l.Info[k] = plain(w.Info[k], "info."+k, bad)
			}
		}
	}
	return l, nil
}

// badAt records a shape problem of item i.
func (in *intake) badAt(i int) func(field, msg string) {
	return func(field, msg string) {
		in.problems = append(in.problems, ItemError{Index: &i, Field: field, Detail: msg})
	}
}

// itemByFields reads item i field by field (encoding/json into maps of
// raw values), naming the field of each problem: an unknown field, a
// number for a string, a destination that is not an object.
func (in *intake) itemByFields(i int, v jsontext.Value) (line, error) {
	var raw map[string]stdjson.RawMessage
	if err := stdjson.Unmarshal(v, &raw); err != nil || raw == nil {
		return line{}, badRequest("items[%d]: not a JSON object", i)
	}
	var l line
	bad := in.badAt(i)
	for k := range raw {
		if k != "externalId" && k != "amount" && k != "destination" && k != "info" {
			bad(k, "unknown field (externalId, amount, destination, info); a card number goes only in destination.cardNumber")
		}
	}
	l.ExternalID = str(raw, "externalId", "externalId", bad)
	l.Amount = str(raw, "amount", "amount", bad)
	var dest map[string]stdjson.RawMessage
	if d, ok := raw["destination"]; !ok || stdjson.Unmarshal(d, &dest) != nil || dest == nil {
		bad("destination", "want an object: {\"cardNumber\": ...} or {\"telecomOperator\": ..., \"phoneNumber\": ...}")
	}
	for k := range dest {
		if k != "cardNumber" && k != "telecomOperator" && k != "phoneNumber" {
			bad("destination."+k, "unknown field (cardNumber, telecomOperator, phoneNumber)")
		}
	}
	l.Card = str(dest, "cardNumber", "destination.cardNumber", bad)
	l.Telecom = str(dest, "telecomOperator", "destination.telecomOperator", bad)
	l.Phone = str(dest, "phoneNumber", "destination.phoneNumber", bad)
	l.Info = in.infoOf(raw["info"], bad)
	return l, nil
}

// plain is s unless it holds a control character (then "" and the
// problem of field): none is accepted, as in a file.
func plain(s, field string, bad func(field, msg string)) string {
	if i := strings.IndexFunc(s, unicode.IsControl); i >= 0 {
		bad(field, fmt.Sprintf("control character U+%04X at position %d: not accepted, as in a file", []rune(s[i:])[0], i))
		return ""
	}
	return s
}

// str is field k of m as a string without control characters ("" when
// absent: the loader says it is required where it is).
func str(m map[string]stdjson.RawMessage, k, field string, bad func(field, msg string)) string {
	v, ok := m[k]
	if !ok || string(v) == "null" {
		return ""
	}
	var s string
	if err := stdjson.Unmarshal(v, &s); err != nil {
		bad(field, "must be a JSON string (amounts are decimal strings such as \"10.50\", never JSON numbers)")
		return ""
	}
	return plain(s, field, bad)
}

// infoOf reads an item's info object, learning its keys.
func (in *intake) infoOf(v stdjson.RawMessage, bad func(field, msg string)) map[string]string {
	if len(v) == 0 || string(v) == "null" {
		return nil
	}
	var raw map[string]stdjson.RawMessage
	if err := stdjson.Unmarshal(v, &raw); err != nil {
		bad("info", "want an object of strings")
		return nil
	}
	out := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		if in.infoName(k, bad) {
			out[k] = str(raw, k, "info."+k, bad)
		}
	}
	return out
}

// infoName checks info name k and learns it (the CSV header's columns);
// false, with the problem, when it is refused.
func (in *intake) infoName(k string, bad func(field, msg string)) bool {
	if !infoKeyOK(k) {
		bad("info."+k, "an info name is 1-64 letters, digits, spaces, '_' or '-', and not a column of the payout itself")
		return false
	}
	if !slices.Contains(in.info, k) {
		if len(in.info) == maxInfoKeys {
			bad("info."+k, fmt.Sprintf("at most %d info names in a batch", maxInfoKeys))
			return false
		}
		in.info = append(in.info, k)
	}
	return true
}

var infoKey = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9 _-]{0,63}$`)

// infoKeyOK: a plain name that is none of the item's own columns.
func infoKeyOK(k string) bool {
	if !infoKey.MatchString(k) {
		return false
	}
	norm := strings.ToLower(strings.NewReplacer(" ", "", "_", "", "-", "").Replace(k))
	for _, c := range []string{payfile.ColExternalID, payfile.ColAmount, payfile.ColCardNumber, payfile.ColTelecomOperator,
		payfile.ColPhoneNumber, payfile.ColReason} {
		if norm == strings.ToLower(c) {
			return false
		}
	}
	return true
}

// writeCSV is the second pass: the header, then the first pass's
// records, copied as they are when no item has info, else padded to the
// header's width.
func (in *intake) writeCSV(path string) error {
	if _, err := in.lines.Seek(0, io.SeekStart); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 64<<10)
	w := csv.NewWriter(bw)
	header := append([]string{payfile.ColExternalID, payfile.ColAmount, payfile.ColCardNumber, payfile.ColTelecomOperator, payfile.ColPhoneNumber}, in.info...)
	if err := w.Write(header); err != nil {
		return err
	}
	w.Flush()
	if len(in.info) == 0 {
		if _, err := io.Copy(bw, in.lines); err != nil {
			return fmt.Errorf("items: %w", err)
		}
	} else if err := pad(w, csv.NewReader(bufio.NewReaderSize(in.lines, 64<<10)), len(header)); err != nil {
		return err
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// pad copies the records of r to w, each padded with empty fields to width.
func pad(w *csv.Writer, r *csv.Reader, width int) error {
	r.FieldsPerRecord, r.ReuseRecord = -1, true
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("items: %w", err)
		}
		for len(rec) < width {
			rec = append(rec, "")
		}
		if err := w.Write(rec); err != nil {
			return err
		}
	}
}
