package mail

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/acme/payout/internal/extid"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/ledger/keys"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/queue"
	"github.com/redis/go-redis/v9"
)

// The review digest. A payout moved to needs_review is added to a zset
// (keys.MailReview, scored by when) and the digest task of the window it
// fell in is enqueued for the window's end (one task ID per window). The
// task mails the operators every payout added up to the window's end, as
// one digest per person (one mark per person per window), and only then
// removes what it listed: a digest cut short lists them again, to those it
// had not reached. Payouts still in the zset then (added after the
// window) get the next window's task.

// reviewEntry is a member of keys.MailReview.
type reviewEntry struct {
	Batch      string `json:"b"`
	ExternalID string `json:"x"`
	Reason     string `json:"r,omitempty"`
}

// digestTask is the payload of TypeDigest: the end of its window (Unix ms).
type digestTask struct {
	End int64 `json:"end"`
}

// addToDigest records a payout that needs review for the digest of the
// current window.
func (m *Mailer) addToDigest(ctx context.Context, ev eventTask) error {
	if ev.Batch == "" || ev.ExternalID == "" {
		return fmt.Errorf("mail: needs_review event without a payout: %w", ErrPermanent)
	}
	member, err := json.Marshal(reviewEntry{Batch: ev.Batch, ExternalID: ev.ExternalID, Reason: ev.Reason})
	if err != nil {
		return fmt.Errorf("mail: encode review entry: %w", err)
	}
	now := m.cfg.Now()
	err = m.cfg.Redis.ZAddNX(ctx, keys.MailReview(), redis.Z{Score: float64(now.UnixMilli()), Member: string(member)}).Err()
	if err != nil {
		return fmt.Errorf("mail: add %s to the review digest: %w", ev.ExternalID, err)
	}
	return m.scheduleDigest(ctx, now)
}

// scheduleDigest enqueues the digest task of the window holding t.
func (m *Mailer) scheduleDigest(ctx context.Context, t time.Time) error {
	end := t.Truncate(m.cfg.DigestEvery).Add(m.cfg.DigestEvery)
	p, _ := json.Marshal(digestTask{End: end.UnixMilli()})
	_, err := m.cfg.Queue.AddMail(ctx, queue.MailTask{Type: TypeDigest, ID: "mail:digest:" + strconv.FormatInt(end.UnixMilli(), 10), Payload: p, At: end})
	return err
}

// digest mails the operators the payouts added up to d.End.
func (m *Mailer) digest(ctx context.Context, d digestTask) error {
	rdb := m.cfg.Redis
	members, err := rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: keys.MailReview(), Start: "-inf", Stop: strconv.FormatInt(d.End, 10),
		ByScore: true, Count: digestRead}).Result()
	if err != nil {
		return fmt.Errorf("mail: read the review digest: %w", err)
	}
	if len(members) > 0 {
		dg, err := m.digestOf(ctx, members)
		if err != nil {
			return err
		}
		msg, err := RenderDigest(dg)
		if err != nil {
			return err
		}
		if err := m.sendAll(ctx, "digest-"+strconv.FormatInt(d.End, 10), m.cfg.Recipients.Role(RoleOperator), msg, "role "+RoleOperator); err != nil {
			return err
		}
		if err := rdb.ZRem(ctx, keys.MailReview(), toAny(members)...).Err(); err != nil {
			return fmt.Errorf("mail: clear the review digest: %w", err)
		}
	}
	left, err := rdb.ZCard(ctx, keys.MailReview()).Result()
	if err != nil || left == 0 {
		return err
	}
	next := m.cfg.Now()
	if end := time.UnixMilli(d.End); next.Before(end) {
		next = end
	}
	return m.scheduleDigest(ctx, next)
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// digestOf reads the payouts of members (at most DigestLines listed, the
// rest counted), each with its amount and masked destination as stored.
func (m *Mailer) digestOf(ctx context.Context, members []string) (Digest, error) {
	dg := Digest{Link: m.link("/queue")}
	var entries []reviewEntry
	for _, s := range members {
		var e reviewEntry
		if json.Unmarshal([]byte(s), &e) == nil && e.Batch != "" {
			entries = append(entries, e)
		}
	}
	if len(entries) > DigestLines {
		dg.More = len(entries) - DigestLines
		entries = entries[:DigestLines]
	}
	batches := map[string]ledger.Batch{}
	for _, e := range entries {
		b, ok := batches[e.Batch]
		if !ok {
			st, err := m.view.Status(ctx, e.Batch)
			if err != nil {
				continue // a batch gone: its payouts are no one's to review
			}
			b, batches[e.Batch] = st.Batch, st.Batch
		}
		line, err := m.reviewLine(ctx, b, e)
		if err != nil {
			return Digest{}, err
		}
		dg.Lines = append(dg.Lines, line)
	}
	return dg, nil
}

func (m *Mailer) reviewLine(ctx context.Context, b ledger.Batch, e reviewEntry) (ReviewLine, error) {
	ps, err := m.view.Payouts(ctx, b.ID, []string{e.ExternalID})
	if err != nil {
		return ReviewLine{}, err
	}
	l := ReviewLine{Batch: b.ID, File: b.File, ExternalID: e.ExternalID, Reason: e.Reason,
		Link: m.link(batchPath(b.ID) + "/payouts/" + extid.PathSegment(e.ExternalID))}
	if len(ps) == 1 {
		p := ps[0]
		l.Amount, l.Destination = money.FixedText(p.Amount, b.Scale), p.Destination
		if l.Reason == "" {
			l.Reason = p.Error
		}
	}
	return l, nil
}
