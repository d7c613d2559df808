package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"iter"
)

type jsonBatch struct {
	ID       string  `json:"id"`
	File     string  `json:"file"`
	LoadedAt *string `json:"loadedAt"`
	Rows     int     `json:"rows"`
	Total    string  `json:"total"`
}

type jsonRow struct {
	Line        int     `json:"line"`
	ExternalID  string  `json:"externalId"`
	Amount      string  `json:"amount"`
	Destination string  `json:"destination"`
	State       string  `json:"state"`
	PSPOrderID  string  `json:"pspOrderId"`
	PSPStatus   string  `json:"pspStatus"`
	Attempts    int     `json:"attempts"`
	Error       string  `json:"error"`
	UpdatedAt   *string `json:"updatedAt"`
	ResolvedBy  string  `json:"resolvedBy"`
	Resolution  string  `json:"resolutionNote"`
	Outcome     string  `json:"outcome"`
}

type jsonStateTotal struct {
	State  string `json:"state"`
	Rows   int    `json:"rows"`
	Amount string `json:"amount"`
}

type jsonGroupTotal struct {
	Group   string `json:"group"`
	Rows    int    `json:"rows"`
	Amount  string `json:"amount"`
	Meaning string `json:"meaning"`
}

type jsonRowsAmount struct {
	Rows   int    `json:"rows"`
	Amount string `json:"amount"`
}

type jsonSummary struct {
	ByState     []jsonStateTotal `json:"byState"`
	Awaiting    jsonRowsAmount   `json:"awaitingOutcome"`
	ByGroup     []jsonGroupTotal `json:"byOutcome"`
	GroupsTotal string           `json:"outcomesTotal"`
	Rows        int              `json:"rows"`
	Total       string           `json:"total"`
	FileRows    int              `json:"fileRows"`
	FileTotal   string           `json:"fileTotal"`
	Reconciled  bool             `json:"reconciled"`
	Final       bool             `json:"final"`
}

// jsonTime is formatTime, with null for the zero time.
func jsonTime(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// MarshalJSON writes the batch as in the "batch" object of WriteJSON.
func (b Batch) MarshalJSON() ([]byte, error) {
	return marshal(jsonBatch{
		ID:       b.ID,
		File:     b.File,
		LoadedAt: jsonTime(formatTime(b.LoadedAt)),
		Rows:     b.Rows,
		Total:    formatAmount(b.Total, b.Scale),
	})
}

// MarshalJSON writes the summary as in the "summary" object of WriteJSON:
// amounts are JSON strings, exact.
func (s Summary) MarshalJSON() ([]byte, error) {
	js := jsonSummary{
		ByState:     make([]jsonStateTotal, len(s.ByState)),
		Awaiting:    jsonRowsAmount{Rows: s.Awaiting.Rows, Amount: formatAmount(s.Awaiting.Amount, s.Scale)},
		ByGroup:     make([]jsonGroupTotal, len(s.ByGroup)),
		GroupsTotal: formatAmount(s.GroupsTotal, s.Scale),
		Rows:        s.Rows,
		Total:       formatAmount(s.Total, s.Scale),
		FileRows:    s.FileRows,
		FileTotal:   formatAmount(s.FileTotal, s.Scale),
		Reconciled:  s.Reconciled,
		Final:       s.Final,
	}
	for i, st := range s.ByState {
		js.ByState[i] = jsonStateTotal{State: st.State, Rows: st.Rows, Amount: formatAmount(st.Amount, s.Scale)}
	}
	for i, g := range s.ByGroup {
		js.ByGroup[i] = jsonGroupTotal{Group: g.Group, Rows: g.Rows, Amount: formatAmount(g.Amount, s.Scale), Meaning: GroupMeaning[g.Group]}
	}
	return marshal(js)
}

// marshal is json.Marshal without HTML escaping ('<', '>' and '&' stay as
// they are in file names and PSP messages).
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// jsonOut encodes values without HTML escaping and without the encoder's
// trailing newline.
type jsonOut struct {
	w   *bufio.Writer
	buf bytes.Buffer
	enc *json.Encoder
}

func newJSONOut(w io.Writer) *jsonOut {
	o := &jsonOut{w: bufio.NewWriter(w)}
	o.enc = json.NewEncoder(&o.buf)
	o.enc.SetEscapeHTML(false)
	return o
}

func (o *jsonOut) raw(s string) error {
	if _, err := o.w.WriteString(s); err != nil {
		return fmt.Errorf("report: writing JSON: %w", err)
	}
	return nil
}

func (o *jsonOut) value(v any) error {
	o.buf.Reset()
	if err := o.enc.Encode(v); err != nil {
		return fmt.Errorf("report: encoding JSON: %w", err)
	}
	if _, err := o.w.Write(bytes.TrimSuffix(o.buf.Bytes(), []byte("\n"))); err != nil {
		return fmt.Errorf("report: writing JSON: %w", err)
	}
	return nil
}

// WriteJSON writes the result of batch b as one JSON object
//
//	{"batch":{...},"rows":[
//	{...},
//	{...}
//	],"summary":{...}}
//
// with one row per line, in line order, streamed as the rows come. Row keys
// are those of the CSV header; amounts are JSON strings written exactly; a
// zero time is null. Values are not neutralised (JSON is for programs), but
// destinations and errors are scrubbed of card numbers. Rows must come in
// strictly increasing line order. It returns the summary it wrote.
func WriteJSON(w io.Writer, b Batch, rows iter.Seq2[Row, error]) (Summary, error) {
	out := newJSONOut(w)
	if err := out.raw(`{"batch":`); err != nil {
		return Summary{}, err
	}
	if err := out.value(b); err != nil {
		return Summary{}, err
	}
	if err := out.raw(`,"rows":[`); err != nil {
		return Summary{}, err
	}
	t := NewTally(b)
	order := orderCheck{batch: b.ID}
	sep := "\n"
	for r, err := range rows {
		if err != nil {
			return Summary{}, sourceError(b, err)
		}
		if err := order.next(r.Line); err != nil {
			return Summary{}, err
		}
		t.Add(r)
		if err := out.raw(sep); err != nil {
			return Summary{}, err
		}
		sep = ",\n"
		err = out.value(jsonRow{
			Line:        r.Line,
			ExternalID:  r.ExternalID,
			Amount:      formatAmount(r.Amount, b.Scale),
			Destination: scrub(r.Destination),
			State:       r.State,
			PSPOrderID:  r.PSPOrderID,
			PSPStatus:   r.PSPStatus,
			Attempts:    r.Attempts,
			Error:       scrub(r.Error),
			UpdatedAt:   jsonTime(formatTime(r.UpdatedAt)),
			ResolvedBy:  scrub(r.ResolvedBy),
			Resolution:  scrub(r.ResolutionNote),
			Outcome:     GroupOf(r),
		})
		if err != nil {
			return Summary{}, err
		}
	}
	s := t.Summary()
	if err := out.raw("\n],\"summary\":"); err != nil {
		return Summary{}, err
	}
	if err := out.value(s); err != nil {
		return Summary{}, err
	}
	if err := out.raw("}\n"); err != nil {
		return Summary{}, err
	}
	if err := out.w.Flush(); err != nil {
		return Summary{}, fmt.Errorf("report: writing JSON: %w", err)
	}
	return s, nil
}
