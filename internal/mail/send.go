package mail

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	netmail "net/mail"
	"strings"

	"github.com/acme/payout/internal/ledger/keys"
	"github.com/redis/go-redis/v9"
)

// The values of a mail's mark (keys.MailSent).
const (
	markSending = "sending"
	markSent    = "sent"
)

// markKey is the mark of event's mail to a: the address hashed, so that
// Redis holds no address.
func markKey(event string, a *netmail.Address) string {
	h := sha256.Sum256([]byte(strings.ToLower(a.Address)))
	return keys.MailSent(event, hex.EncodeToString(h[:])[:16])
}

// sendAll sends msg to every address of to, each at most once for event
// (who names them for the log). It returns the errors of the sends that
// may be tried again: the task's retry sends those, and skips the ones
// done.
func (m *Mailer) sendAll(ctx context.Context, event string, to []*netmail.Address, msg Message, who string) error {
	log := m.cfg.Logger.With().Str("mail", event).Str("to", who).Logger()
	if len(to) == 0 {
		log.Warn().Msg("no recipient configured: no mail (recipients file)")
		return nil
	}
	var errs []error
	for _, a := range to {
		errs = append(errs, m.sendOnce(ctx, event, a, msg))
	}
	return errors.Join(errs...)
}

// sendOnce marks event's mail to a, sends it, and records it sent. A
// mark already there means it was sent, or may have been: nothing is
// sent. A send that provably failed removes the mark and returns its
// error (retried); one that may have delivered keeps it (never sent
// twice).
func (m *Mailer) sendOnce(ctx context.Context, event string, a *netmail.Address, msg Message) error {
	log := m.cfg.Logger.With().Str("mail", event).Str("rcpt", a.Address).Logger()
	key := markKey(event, a)
	fresh, err := m.cfg.Redis.SetNX(ctx, key, markSending, DedupeTTL).Result()
	if err != nil {
		return fmt.Errorf("mail: mark %s: %w", event, err)
	}
	if !fresh {
		log.Debug().Msg("mail sent before (or being sent): not again")
		return nil
	}
	err = m.cfg.Sender.Send(ctx, a, msg)
	switch {
	case err == nil:
		// KEEPTTL: the mark expires when it would have.
		if err := m.cfg.Redis.SetArgs(ctx, key, markSent, redis.SetArgs{Mode: "XX", KeepTTL: true}).Err(); err != nil {
			log.Warn().Err(err).Msg("mail sent; its mark stays 'sending'")
		}
		log.Info().Str("subject", msg.Subject).Msg("mail sent")
		return nil
	case errors.Is(err, ErrMaybeSent):
		log.Error().Err(err).Msg("mail may or may not have reached the mail server: not sent again (at most once)")
		return nil
	}
	if derr := m.cfg.Redis.Del(context.WithoutCancel(ctx), key).Err(); derr != nil {
		log.Error().Err(derr).Msg("mail not sent, and its mark could not be removed: it will not be retried")
		return nil
	}
	log.Warn().Err(err).Msg("mail not sent; will retry")
	return fmt.Errorf("mail %s to %s: %w", event, a.Address, err)
}
