package notify

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// The Standard Webhooks headers (https://www.standardwebhooks.com): every
// delivery carries them. The signature is "v1," + base64 HMAC-SHA256
// over "id.timestamp.body" under each current secret, space-separated.
const (
	HeaderID        = standardwebhooks.HeaderWebhookID        // webhook-id: the event id
	HeaderTimestamp = standardwebhooks.HeaderWebhookTimestamp // webhook-timestamp: Unix seconds of this attempt
	HeaderSignature = standardwebhooks.HeaderWebhookSignature // webhook-signature: "v1,SIG[ v1,SIG]"
	// SecretPrefix begins a Standard Webhooks secret: whsec_ and the
	// base64 of the key (at least 24 bytes; `payout keygen` makes 32).
	SecretPrefix = "whsec_"
)

// Signer signs deliveries with one or two secrets: during a rotation the
// new and the old secret both sign, and a receiver that knows either
// accepts the delivery.
type Signer struct {
	hooks []*standardwebhooks.Webhook
	// legacy is the key of the X-Payout-Signature header (the first
	// secret), kept for receivers written before Standard Webhooks.
	legacy []byte
}

// ErrSecret is the error of a secret that cannot sign.
var ErrSecret = errors.New("notify: unusable signing secret")

// NewSigner parses the value of SecretEnv: one secret, or two separated
// by a space or a comma (new first, then old, during a rotation). A
// secret with the whsec_ prefix is the base64 of its key (Standard
// Webhooks); one without is used as its bytes (the format before).
func NewSigner(value string) (*Signer, error) {
	parts := strings.FieldsFunc(value, func(r rune) bool { return r == ' ' || r == ',' })
	if len(parts) == 0 {
		return nil, ErrNoSecret
	}
	if len(parts) > 2 {
		return nil, fmt.Errorf("%w: %d secrets in %s, at most 2 (new, old)", ErrSecret, len(parts), SecretEnv)
	}
	s := &Signer{}
	for i, p := range parts {
		key := []byte(p)
		if strings.HasPrefix(p, SecretPrefix) {
			k, err := decodeKey(p)
			if err != nil {
				return nil, fmt.Errorf("%w: secret %d of %s: %w", ErrSecret, i+1, SecretEnv, err)
			}
			key = k
		}
		wh, err := standardwebhooks.NewWebhookRaw(key)
		if err != nil {
			return nil, fmt.Errorf("%w: secret %d of %s: %w", ErrSecret, i+1, SecretEnv, err)
		}
		if i == 0 {
			s.legacy = key
		}
		s.hooks = append(s.hooks, wh)
	}
	return s, nil
}

// decodeKey reads a whsec_ secret's key, refusing one under 24 bytes.
func decodeKey(secret string) ([]byte, error) {
	// as the library's NewWebhook does, which keeps the key to itself
	k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil {
		return nil, fmt.Errorf("not base64 after %s: %w", SecretPrefix, err)
	}
	if len(k) < 24 {
		return nil, fmt.Errorf("key of %d bytes, want at least 24", len(k))
	}
	return k, nil
}

// Headers sets the Standard Webhooks headers of one attempt at ts on h,
// and the older X-Payout-* headers beside them.
func (s *Signer) Headers(h http.Header, id, typ string, ts time.Time, body []byte) error {
	sigs := make([]string, 0, len(s.hooks))
	for _, wh := range s.hooks {
		sig, err := wh.Sign(id, ts, body)
		if err != nil {
			return fmt.Errorf("notify: sign %s: %w", id, err)
		}
		sigs = append(sigs, sig)
	}
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, strings.Join(sigs, " "))
	h.Set(SignatureHeader, Sign(string(s.legacy), body))
	h.Set(EventIDHeader, id)
	h.Set(EventTypeHeader, typ)
	return nil
}

// VerifyStandard checks a delivery's Standard Webhooks headers with
// secret (whsec_...), timestamp within five minutes: what a receiver
// does, for tests and for receivers written in Go.
func VerifyStandard(secret string, body []byte, h http.Header) error {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSecret, err)
	}
	if err := wh.Verify(body, h); err != nil {
		return fmt.Errorf("notify: delivery not verified: %w", err)
	}
	return nil
}

// Endpoint is one receiver of events and the event types it subscribed
// to (none: every type).
type Endpoint struct {
	URL   string
	Types []string
}

// typesRE is a subscription's list of types: type names or prefixes
// ending in "*" (payout.*), joined by "|".
var typesRE = regexp.MustCompile(`^[a-z_.*]+(\|[a-z_.*]+)*$`)

// ParseEndpoint reads one --notify-url value: URL (every event), or
// TYPES=URL with TYPES the subscribed types joined by "|", each a type
// or a prefix ending in "*": "payout.paid|payout.returned|batch_final=https://...".
func ParseEndpoint(v string) (Endpoint, error) {
	e := Endpoint{URL: v}
	if pre, u, ok := strings.Cut(v, "="); ok && !strings.Contains(pre, "://") {
		if !typesRE.MatchString(pre) {
			return Endpoint{}, fmt.Errorf("notify URL %q: event types %q: want types or prefixes* joined by |", Redact(u), pre)
		}
		e = Endpoint{URL: u, Types: strings.Split(pre, "|")}
	}
	if err := CheckURL(e.URL); err != nil {
		return Endpoint{}, err
	}
	return e, nil
}

// Wants tells whether the endpoint subscribed to events of type t.
func (e Endpoint) Wants(t Type) bool {
	if len(e.Types) == 0 {
		return true
	}
	for _, w := range e.Types {
		if p, ok := strings.CutSuffix(w, "*"); ok && strings.HasPrefix(string(t), p) || w == string(t) {
			return true
		}
	}
	return false
}

// EndpointID names an endpoint in the delivery log and the metrics
// without its URL (whose path or query may hold a token): 12 hex digits
// of its SHA-256.
func EndpointID(u string) string {
	h := sha256.Sum256([]byte(u))
	return hex.EncodeToString(h[:])[:12]
}

// PayoutFields are the public fields of a payout in its events: never
// the sealed card number, a full card number or the PSP token.
type PayoutFields struct {
	State         string `json:"state"`
	PreviousState string `json:"previousState,omitempty"`
	Amount        string `json:"amount"`      // exact decimal text
	Destination   string `json:"destination"` // masked: card 6/4, or operator and number
}

// PayoutChange is the fact of one payout state change as the ledger's
// outbox holds it (ledger.OutboxEvent).
type PayoutChange struct {
	Batch, ExternalID string
	Seq               int64
	Type              string
	From, To          string
	At                time.Time
	Amount, Dest      string
}

// PayoutEvent is the event of a payout state change. Its id derives from
// the batch, the payout and its sequence number: every drain of the same
// outbox entry is the same event.
func PayoutEvent(c PayoutChange) Event {
	seq := strconv.FormatInt(c.Seq, 10)
	return Event{
		ID: NewID("payout", c.Batch, c.ExternalID, seq), Type: Type(c.Type), Time: c.At, OccurredAt: c.At,
		Batch: c.Batch, ExternalID: c.ExternalID, Sequence: c.Seq,
		Payout: &PayoutFields{State: c.To, PreviousState: c.From, Amount: c.Amount, Destination: c.Dest},
	}
}
