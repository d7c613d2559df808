package sandbox

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/acme/payout/internal/card"
	"github.com/acme/payout/internal/httpstatus"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/sandbox/h2rst"
)

type ctxKey struct{}

// reqInfo is what the middleware learned about a PSP request.
type reqInfo struct {
	op         string
	externalID string
	body       []byte
	bodyErr    error
}

func opOf(r *http.Request) string {
	p := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case r.Method == http.MethodPost && p == pathWithdrawal:
		return OpWithdrawalCreate
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, pathWithdrawal+"/"):
		return OpWithdrawalStatus
	case r.Method == http.MethodPost && p == pathDeposit:
		return OpDepositCreate
	}
	return ""
}

// pspMiddleware applies the faults that come before any processing
// (outage, latency, forced answers that store nothing), counts and logs.
func (s *Server) pspMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		s.inflight.Add(1)
		defer s.inflight.Add(-1)
		rec := &recorder{Writer: httpstatus.Writer{ResponseWriter: w}}
		info := &reqInfo{op: opOf(r)}
		if r.Method == http.MethodPost {
			info.body, info.bodyErr = io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
			info.externalID = peekExternalID(info.op, info.body)
		}

		outage, delay := s.admit(info)

		defer func() {
			a := rec.answer()
			s.mu.Lock()
			s.stats.Answers[a]++
			s.mu.Unlock()
			s.log.Info().Str("op", orDefault(info.op, "unknown")).Str("method", r.Method).
				Str("path", card.Scrub(r.URL.Path)).Str("external_id", card.Scrub(info.externalID)).
				Str("answer", a).Dur("duration", time.Since(start)).Msg("psp request")
		}()

		if outage {
			writeError(rec, http.StatusServiceUnavailable, "service unavailable (sandbox outage window)")
			return
		}
		if delay > 0 && !s.sleep(r.Context(), delay) {
			// The client went away or the server stops: never let the
			// handler return without a word (net/http would send a
			// 200 with an empty body).
			rec.fault = "gone"
			abort(rec)
		}
		if force, ok := s.takeForced(info.op, false); ok {
			s.applyFault(rec, r, force)
			return
		}
		next.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), ctxKey{}, info)))
	})
}

// admit counts a request of info.op and reads the faults that apply to it
// before any processing: whether the outage window is open now, and the
// latency to add (none during an outage).
func (s *Server) admit(info *reqInfo) (outage bool, delay time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch info.op {
	case OpWithdrawalCreate:
		s.stats.CreatesReceived++
		if info.externalID != "" {
			s.stats.CreatesByExternalID[info.externalID]++
		}
	case OpDepositCreate:
		s.stats.DepositsReceived++
	case OpWithdrawalStatus:
		s.stats.StatusQueries++
	}
	f := s.faults
	if f.Outage.Contains(s.clock.Now().Sub(s.start)) {
		return true, 0
	}
	delay = f.Latency
	if f.LatencyJitter > 0 {
		delay += time.Duration(s.rng.Int64N(int64(f.LatencyJitter) + 1))
	}
	return false, delay
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// sleep waits d; false when the client went away or the server stops.
func (s *Server) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-s.stop:
		return false
	}
}

func peekExternalID(op string, body []byte) string {
	var v struct {
		ExternalID            any `json:"externalId"`
		ExternalTransactionID any `json:"externalTransactionId"`
	}
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	id := v.ExternalID
	if op == OpDepositCreate {
		id = v.ExternalTransactionID
	}
	if s, ok := id.(string); ok {
		return s
	}
	return ""
}

// authorize answers 401 or 403 and returns false when the request may not
// proceed.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) bool {
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(s.token)) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="psp-sandbox"`)
		writeError(w, http.StatusUnauthorized, "missing or invalid bearer token")
		return false
	}
	if s.Faults().Forbid {
		writeError(w, http.StatusForbidden, "authorization of this account is disabled (sandbox --forbid)")
		return false
	}
	return true
}

func info(r *http.Request) *reqInfo {
	if i, ok := r.Context().Value(ctxKey{}).(*reqInfo); ok {
		return i
	}
	return &reqInfo{}
}

// badRequest is a validation failure: status and a message free of card
// numbers.
type badRequest struct {
	status int
	msg    string
}

func invalid(format string, args ...any) *badRequest {
	return &badRequest{http.StatusBadRequest, card.Scrub(sprintf(format, args...))}
}

// decodeBody decodes a JSON object keeping numbers as json.Number, and
// refuses trailing data.
func decodeBody(body []byte, bodyErr error, v any) *badRequest {
	if bodyErr != nil {
		return invalid("request body unreadable or larger than 1 MiB")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return invalid("malformed JSON body")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalid("malformed JSON body: data after the object")
	}
	return nil
}

var refused = money.MustParse(RefusedAmount)

// parseAmount reads an amount given as a JSON string or number, on its
// exact text.
func parseAmount(v any) (money.Amount, *badRequest) {
	var text string
	switch a := v.(type) {
	case string:
		text = a
	case json.Number:
		text = a.String()
	case nil:
		return money.Amount{}, invalid("amount is missing")
	default:
		return money.Amount{}, invalid("amount must be a number or a decimal string")
	}
	amt, err := money.Parse(text, 2)
	if err != nil {
		return money.Amount{}, invalid("%v", err)
	}
	if amt.Cmp(refused) == 0 {
		return money.Amount{}, invalid("amount %s is refused as invalid (sandbox magic value)", RefusedAmount)
	}
	return amt, nil
}

func propValue(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	}
	return "", false
}

type propIn struct {
	Key   string `json:"key"`
	Value any    `json:"value"`
}

// withdrawalIn is a decoded, validated withdrawal create.
type withdrawalIn struct {
	externalID string
	amount     money.Amount
	amountText string
	props      []Property // masked
	card       string     // full digits, for the decline check only
}

func validateWithdrawal(body []byte, bodyErr error) (*withdrawalIn, *badRequest) {
	var in struct {
		ExternalID any      `json:"externalId"`
		Amount     any      `json:"amount"`
		Properties []propIn `json:"properties"`
	}
	if e := decodeBody(body, bodyErr, &in); e != nil {
		return nil, e
	}
	ext, _ := in.ExternalID.(string)
	if strings.TrimSpace(ext) == "" {
		return nil, invalid("externalId is missing or not a string")
	}
	amt, e := parseAmount(in.Amount)
	if e != nil {
		return nil, e
	}
	out := &withdrawalIn{externalID: ext, amount: amt, amountText: amountText(amt)}
	dest := false
	for _, p := range in.Properties {
		val, ok := propValue(p.Value)
		if !ok {
			return nil, invalid("property %q: value must be a string", p.Key)
		}
		switch {
		case strings.EqualFold(p.Key, "cardNumber"):
			digits, err := card.Normalize(val)
			if err != nil {
				return nil, invalid("%v", err)
			}
			out.card = digits
			out.props = append(out.props, Property{"cardNumber", card.Mask(digits)})
			dest = true
		case strings.EqualFold(p.Key, "telecomOperator"):
			if strings.TrimSpace(val) == "" {
				return nil, invalid("telecomOperator is empty")
			}
			out.props = append(out.props, Property{"telecomOperator", card.Scrub(val)})
			dest = true
		default:
			out.props = append(out.props, Property{p.Key, card.Scrub(val)})
		}
	}
	if !dest {
		return nil, invalid("no destination: properties need a cardNumber or a telecomOperator")
	}
	return out, nil
}

// amountText keeps the decimals as received ("10.50").
func amountText(a money.Amount) string {
	d := a.Decimal()
	if e := d.Exponent(); e < 0 {
		return d.StringFixed(-e)
	}
	return d.String()
}

type withdrawalOut struct {
	Amount       string `json:"amount"`
	Status       string `json:"status"`
	ExternalID   string `json:"externalId"`
	OrderID      string `json:"pspDepositOrderID"`
	StatusReason string `json:"statusReason,omitempty"` // with the failed and returned words only
	ReturnedAt   string `json:"returnedAt,omitempty"`   // with the returned word only
}

func (s *Server) handleCreateWithdrawal(w http.ResponseWriter, r *http.Request) {
	if !s.authorize(w, r) {
		return
	}
	ri := info(r)
	in, bad := validateWithdrawal(ri.body, ri.bodyErr)
	if bad != nil {
		writeError(w, bad.status, bad.msg)
		return
	}
	if in.card == DeclinedCard {
		writeError(w, http.StatusUnprocessableEntity, "card "+card.Mask(in.card)+" declined (sandbox magic value)")
		return
	}
	order := Order{
		Kind:       "withdrawal",
		ExternalID: in.externalID,
		Amount:     in.amountText,
		Properties: in.props,
		Status:     StatusCreated,
	}
	fault, tooMuch := s.decideAndStore(OpWithdrawalCreate, &order, in.amount)
	if tooMuch {
		writeError(w, http.StatusUnprocessableEntity, "amount exceeds the account limit")
		return
	}
	if fault != nil {
		s.applyFault(w.(*recorder), r, *fault)
		return
	}
	writeJSON(w, http.StatusOK, withdrawalOut{Amount: order.Amount, Status: order.Status, ExternalID: order.ExternalID, OrderID: order.PSPOrderID})
}

var ambiguousPool = []Force{
	{Status: http.StatusInternalServerError},
	{Status: http.StatusBadGateway},
	{Status: http.StatusServiceUnavailable},
	{Status: http.StatusLocked},
	{Fault: FaultHang},
	{Fault: FaultDrop},
}

// decideAndStore draws the random faults of a valid create and stores the
// order unless it is refused (423) or over the amount limit. It returns the
// bad answer to give instead of a 200 (nil for a 200) and whether the
// amount is over the limit (nothing stored, no fault).
func (s *Server) decideAndStore(op string, o *Order, amt money.Amount) (fault *Force, tooMuch bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.faults
	if !f.MaxAmount.IsZero() && amt.Cmp(f.MaxAmount) > 0 {
		return nil, true
	}
	if f.PRefuse > 0 && s.rng.Float64() < f.PRefuse {
		return &Force{Status: http.StatusLocked}, false
	}
	if f.PAmbiguous > 0 && s.rng.Float64() < f.PAmbiguous {
		fc := ambiguousPool[s.rng.IntN(len(ambiguousPool))]
		fault = &fc
	} else if fc, ok := s.takeForcedLocked(op, true); ok {
		fault = &fc
	} else if f.PH2Reset > 0 && s.rng.Float64() < f.PH2Reset {
		fault = &Force{Fault: FaultH2Reset}
	}
	prefix := "WD-"
	if o.Kind == "deposit" {
		prefix = "DP-"
	}
	o.PSPOrderID = prefix + s.uuidLocked()
	if s.cfg.NumericOrderIDs && o.Kind == "withdrawal" {
		o.PSPOrderID = s.luhnIDLocked()
	}
	o.CreatedAt = s.clock.Now().UTC()
	o.Answer = "200"
	if fault != nil {
		o.Answer = fault.label()
	}
	if o.Kind == "withdrawal" {
		// Whatever answer the client gets, a stored order lives its
		// lifecycle.
		s.decideFateLocked(o)
	}
	s.orders = append(s.orders, *o)
	s.byID[o.PSPOrderID] = len(s.orders) - 1
	if o.Kind == "withdrawal" {
		s.byExt[o.ExternalID] = append(s.byExt[o.ExternalID], len(s.orders)-1)
		s.stats.OrdersStored++
		s.cb.scheduleLocked(*o, len(s.orders)-1)
	} else {
		s.stats.DepositsStored++
	}
	return fault, false
}

// uuidLocked draws a UUID-like (version 4 shaped) id from the seeded source.
func (s *Server) uuidLocked() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], s.rng.Uint64())
	binary.BigEndian.PutUint64(b[8:], s.rng.Uint64())
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// luhnIDLocked is a new 16-digit order id that passes the Luhn check
// (Config.NumericOrderIDs), drawn from the seeded source.
func (s *Server) luhnIDLocked() string {
	d := make([]byte, 15, 16)
	d[0] = byte('1' + s.rng.IntN(9))
	for i := 1; i < len(d); i++ {
		d[i] = byte('0' + s.rng.IntN(10))
	}
	return string(d) + strconv.Itoa(card.CheckDigit(string(d)))
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	if !s.authorize(w, r) {
		return
	}
	id := r.PathValue("id")
	s.mu.Lock()
	now := s.clock.Now()
	visible := func(i int) bool {
		return s.orders[i].Kind == "withdrawal" && now.Sub(s.orders[i].CreatedAt) >= s.faults.StatusLag
	}
	var o Order
	i, ok := s.byID[id]
	if ok {
		ok = visible(i)
	} else {
		// By externalId: the latest order visible (past the lag).
		idx := s.byExt[id]
		for k := len(idx) - 1; k >= 0 && !ok; k-- {
			i, ok = idx[k], visible(idx[k])
		}
	}
	if ok {
		o = s.orders[i].at(now)
	}
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "order not found")
		return
	}
	writeJSON(w, http.StatusOK, withdrawalOut{Amount: o.Amount, Status: o.Status, ExternalID: o.ExternalID, OrderID: o.PSPOrderID, StatusReason: o.StatusReason, ReturnedAt: o.ReturnedAt})
}

func (s *Server) handleCreateDeposit(w http.ResponseWriter, r *http.Request) {
	if !s.authorize(w, r) {
		return
	}
	ri := info(r)
	var in struct {
		Amount                any      `json:"amount"`
		Currency              any      `json:"currency"`
		ExternalTransactionID any      `json:"externalTransactionId"`
		CallbackURL           any      `json:"callbackUrl"`
		AdditionalFields      []propIn `json:"additionalFields"`
	}
	if bad := decodeBody(ri.body, ri.bodyErr, &in); bad != nil {
		writeError(w, bad.status, bad.msg)
		return
	}
	ext, _ := in.ExternalTransactionID.(string)
	if strings.TrimSpace(ext) == "" {
		writeError(w, http.StatusBadRequest, "externalTransactionId is missing or not a string")
		return
	}
	amt, bad := parseAmount(in.Amount)
	if bad != nil {
		writeError(w, bad.status, bad.msg)
		return
	}
	cur, _ := in.Currency.(string)
	if !isCurrency(cur) {
		writeError(w, http.StatusBadRequest, "currency must be a three-letter code")
		return
	}
	order := Order{Kind: "deposit", ExternalID: ext, Amount: amountText(amt), Currency: cur, Status: "Processing"}
	props, msg := depositProperties(in.AdditionalFields)
	if msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	order.Properties = props
	fault, tooMuch := s.decideAndStore(OpDepositCreate, &order, amt)
	if tooMuch {
		writeError(w, http.StatusBadRequest, "amount exceeds the account limit")
		return
	}
	if fault != nil {
		s.applyFault(w.(*recorder), r, *fault)
		return
	}
	writeDepositCreated(w, r, order)
}

// writeDepositCreated answers a deposit order created: its externalId,
// status and the payment form's URL on this server.
func writeDepositCreated(w http.ResponseWriter, r *http.Request, order Order) {
	type details struct {
		Amount  string `json:"amount"`
		FormURL string `json:"formUrl"`
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	writeJSON(w, http.StatusOK, struct {
		ExternalID     string  `json:"externalId"`
		OrderStatus    string  `json:"orderStatus"`
		PaymentDetails details `json:"paymentDetails"`
	}{order.ExternalID, order.Status, details{order.Amount, scheme + "://" + r.Host + "/sandbox/pay/" + order.PSPOrderID}})
}

// depositProperties reads a deposit's additional fields as the order keeps
// them: the card number masked (refused when invalid or the declined magic
// value), the CVV never, every other value scrubbed. msg is the 400's
// message for a field refused ("" when all are taken).
func depositProperties(fields []propIn) (props []Property, msg string) {
	for _, p := range fields {
		val, ok := propValue(p.Value)
		if !ok {
			return nil, card.Scrub(sprintf("additional field %q: value must be a string", p.Key))
		}
		switch {
		case strings.EqualFold(p.Key, "cardNumber"):
			digits, err := card.Normalize(val)
			if err != nil {
				return nil, card.Scrub(err.Error())
			}
			if digits == DeclinedCard {
				return nil, "card " + card.Mask(digits) + " declined (sandbox magic value)"
			}
			props = append(props, Property{p.Key, card.Mask(digits)})
		case strings.EqualFold(p.Key, "cardCvv"):
			// never stored
		default:
			props = append(props, Property{p.Key, card.Scrub(val)})
		}
	}
	return props, ""
}

func isCurrency(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if s[i] < 'A' || s[i] > 'Z' {
			return false
		}
	}
	return true
}

// applyFault gives a bad answer: a status, a hang, a dropped connection or
// a 200 with a body that does not parse.
func (s *Server) applyFault(w *recorder, r *http.Request, f Force) {
	switch f.Fault {
	case FaultHang:
		w.fault = FaultHang
		hang := s.Faults().HangFor
		if s.sleep(r.Context(), hang) {
			writeError(w, http.StatusGatewayTimeout, "upstream timeout")
			return
		}
		abort(w) // client gone, or shutting down
	case FaultDrop:
		w.fault = FaultDrop
		// The body was read by the middleware: the request was fully
		// received. Close the connection without a word.
		abort(w)
	case FaultH2Reset:
		// The body was read by the middleware and the order stored.
		// Over HTTP/2 (served with TLS by Serve) the handler's abort
		// resets the stream, and the connection turns its code into
		// PROTOCOL_ERROR (h2rst); anything else is dropped.
		if tc := connOf(r); tc != nil && r.ProtoMajor == 2 && tc.ResetNext(h2rst.ErrCodeProtocol) {
			w.fault = FaultH2Reset
			s.mu.Lock()
			s.stats.H2Resets++
			s.mu.Unlock()
			panic(http.ErrAbortHandler)
		}
		w.fault = FaultDrop
		abort(w)
	case FaultGarbage200:
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "<html><body>Maintenance in progress</body></html>")
	default:
		if f.RetryAfter != "" {
			w.Header().Set("Retry-After", f.RetryAfter)
		}
		writeError(w, f.Status, "sandbox fault: "+http.StatusText(f.Status))
	}
}

// abort closes the connection without an answer.
func abort(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // HTTP/2 or already hijacked: abort the stream
	}
	_ = conn.Close()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"message":"encode error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, struct {
		Status  int    `json:"status"`
		Title   string `json:"title"`
		Message string `json:"message"`
	}{status, http.StatusText(status), card.Scrub(msg)})
}
