package ledger

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/identity"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/scrub"
)

// Approval by several people. A batch held under an approval rule
// (package approval; Figures.Need, Role, Rule, recorded before its first
// row) needs Need distinct people, each holding Role, none of them its
// loader. Each approval is one compare-and-set script on the batch's
// metadata hash: it records the approver under the field "ap:" + their
// identity.Key (so the same person twice is one approval), and only the
// Need-th moves the batch to loaded. A batch held under no rule needs one
// approval, as before.
//
// A batch held with an expiry (HoldBatchFor) records when its approval
// request ends (Batch.ExpiresAt, on Redis's clock): from then on the
// approval script refuses (ErrExpired) and the reconciler discards it
// (ExpireBatch). Both are compare-and-sets on the batch's phase: of an
// approval racing the expiry exactly one wins.

// More typed refusals of approvals.
var (
	// ErrApproverRole: the approver does not hold the role the batch's
	// approval rule names.
	ErrApproverRole = errors.New("ledger: the approver does not hold the role the approval rule asks for")
	// ErrAlreadyApproved: this person's approval of the batch is recorded
	// already; it counts once.
	ErrAlreadyApproved = errors.New("ledger: this person approved the batch already")
	// ErrExpired: the batch's approval request expired (it is, or is about
	// to be, discarded by the reconciler).
	ErrExpired = errors.New("ledger: the approval request expired")
)

// ExpiryActor is who the audit trail names for a batch discarded because
// its approval request expired.
var ExpiryActor = identity.System("approval-expiry", "reconciler")

// Approver is one approval recorded on a batch.
type Approver struct {
	By   string
	Role string // the role the rule asked for ("" under no rule)
	At   time.Time
	Note string
}

// approverField is the prefix of the metadata fields of the approvals.
const approverField = "ap:"

// parseApprovers reads the approvals of a batch's metadata, in the order
// they were given.
func parseApprovers(m map[string]string) []Approver {
	var out []Approver
	for k, v := range m {
		if !strings.HasPrefix(k, approverField) {
			continue
		}
		f := strings.SplitN(v, "\t", 4)
		for len(f) < 4 {
			f = append(f, "")
		}
		out = append(out, Approver{At: msTime(f[0]), Role: f[1], By: f[2], Note: f[3]})
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].At.Equal(out[j].At) {
			return out[i].At.Before(out[j].At)
		}
		return out[i].By < out[j].By
	})
	return out
}

// Needed is how many distinct approvals the batch needs: its rule's
// count, one under no rule.
func (b Batch) Needed() int {
	if b.Need < 1 {
		return 1
	}
	return b.Need
}

// ApproverNames are the names of the approvals given so far, comma
// separated ("alice, bob").
func (b Batch) ApproverNames() string {
	names := make([]string, len(b.Approvers))
	for i, a := range b.Approvers {
		names[i] = a.By
	}
	return strings.Join(names, ", ")
}

// ApprovalProgress says where the approvals of a batch stand: "1 of 2
// approvals: alice"; "" for a batch that needs one and has none.
func (b Batch) ApprovalProgress() string {
	if len(b.Approvers) == 0 && b.Needed() == 1 {
		return ""
	}
	s := fmt.Sprintf("%d of %d approvals", len(b.Approvers), b.Needed())
	if len(b.Approvers) > 0 {
		s += ": " + b.ApproverNames()
	}
	return s
}

// approveScript records one approval of a batch awaiting approval and,
// when it is the last one needed, moves the batch to loaded.
//
//	KEYS[1] meta  KEYS[2] audit
//	ARGV[1] field (ap:KEY)  ARGV[2] approver  ARGV[3] role  ARGV[4] note
//	ARGV[5] 1 when the day's sum was reserved for the final approval
//	ARGV[6] the role the person acts in (internal/access; the audit's role)
//
// Replies {'phase', phase}, {'expired', expat}, {'dup', ”},
// {'reserve', have} (the final approval needs the day's sum reserved
// first), {'partial', have} or {'approved', have}.
var approveScript = script(lifecycle.RolePerson, `
local ph = redis.call('HGET', KEYS[1], 'phase')
if ph ~= 'awaiting_approval' then return {'phase', ph or ''} end
local now = nowms()
local expat = tonumber(redis.call('HGET', KEYS[1], 'expat') or '0') or 0
if expat > 0 and tonumber(now) >= expat then return {'expired', tostring(expat)} end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return {'dup', ''} end
local need = tonumber(redis.call('HGET', KEYS[1], 'aneed') or '1') or 1
if need < 1 then need = 1 end
local have = tonumber(redis.call('HGET', KEYS[1], 'apn') or '0') or 0
if have + 1 >= need and ARGV[5] ~= '1' then return {'reserve', tostring(have)} end
have = have + 1
redis.call('HSET', KEYS[1], ARGV[1], now .. '\t' .. ARGV[3] .. '\t' .. ARGV[2] .. '\t' .. ARGV[4], 'apn', have)
local what = 'approval ' .. have .. ' of ' .. need .. ' by ' .. ARGV[2]
if ARGV[3] ~= '' then what = what .. ' (' .. ARGV[3] .. ')' end
if have < need then
  local note = what
  if ARGV[4] ~= '' then note = note .. ': ' .. ARGV[4] end
  redis.call('XADD', KEYS[2], '*', 't', now, 'actor', ARGV[2], 'ext', '', 'from', 'awaiting_approval',
    'to', 'awaiting_approval', 'note', note, unpack(roleField(ARGV[6])))
  return {'partial', tostring(have)}
end
local note = 'approved'
if ARGV[4] ~= '' then note = note .. ': ' .. ARGV[4] end
redis.call('HSET', KEYS[1], 'phase', 'loaded', 'dby', ARGV[2], 'dat', now, 'note', note)
if need > 1 then note = note .. ' (' .. what .. ')' end
redis.call('XADD', KEYS[2], '*', 't', now, 'actor', ARGV[2], 'ext', '', 'from', 'awaiting_approval',
  'to', 'loaded', 'note', note, unpack(roleField(ARGV[6])))
return {'approved', tostring(have)}
`)

// Approve records a's approval of a batch awaiting approval. The batch
// moves to loaded with the last approval its rule needs (one under no
// rule); the caller then enqueues the creates of its queued payouts
// (EnqueueApproved; the reconciler does it too if the caller dies). An
// approval before the last is recorded and the batch returned still
// awaiting approval (Batch.Approvers holds it). Refused, with nothing
// recorded: a batch not awaiting approval (ErrNotAwaiting), expired
// (ErrExpired), its loader under four-eyes or under a rule (ErrFourEyes),
// an approver without the rule's role (ErrApproverRole), the same person
// twice (ErrAlreadyApproved), over the daily limit (ErrDailyLimit). The
// day's sum is reserved only by the last approval, atomically, and given
// back if that approval does not move the batch after all.
func (c Controls) Approve(ctx context.Context, id string, a Approval) (Batch, error) {
	b, err := c.l.Batch(ctx, id)
	if err != nil {
		return b, err
	}
	if b.Phase != lifecycle.PhaseAwaiting {
		return b, fmt.Errorf("batch %s is %s: %w", id, b.Phase, ErrNotAwaiting)
	}
	if err := b.mayApprove(a.By, a.FourEyes || b.Need > 0); err != nil {
		return b, err
	}
	role, err := b.approverRole(a)
	if err != nil {
		return b, err
	}
	note := ""
	if strings.TrimSpace(a.Note) != "" {
		if note, err = typed("note", strings.TrimSpace(a.Note), scrub.MaxNote); err != nil {
			return b, fmt.Errorf("approve %s: %w", id, err)
		}
	}
	by, err := typed("operator name", a.By, scrub.MaxField)
	if err != nil {
		return b, fmt.Errorf("approve %s: %w", id, err)
	}
	key := identity.Key(by)
	if key == "" {
		key = strings.ToLower(strings.TrimSpace(by))
	}
	return c.approve(ctx, b, a, []any{approverField + key, by, role, note, "0", roleOf(ctx)})
}

// approverRole is the role a's approval is recorded in: the batch's
// rule's, which a must hold (ErrApproverRole); "" under no rule.
func (b Batch) approverRole(a Approval) (string, error) {
	if b.Need < 1 || b.NeedRole == "" {
		return "", nil
	}
	if !a.Roles.Has(access.Role(b.NeedRole)) {
		return "", fmt.Errorf("batch %s needs %d approvals by people holding the role %s (rule %s), and %s holds %s: %w",
			b.ID, b.Needed(), b.NeedRole, b.Rule, a.By, a.Roles, ErrApproverRole)
	}
	return b.NeedRole, nil
}

// approve runs approveScript (argv its ARGV), reserving the day's sum
// when the script says this approval is the last (and running it again
// once), giving the sum back when the approval did not move the batch.
func (c Controls) approve(ctx context.Context, b Batch, a Approval, argv []any) (Batch, error) {
	var (
		day   string
		units int64
	)
	for range 2 {
		res, err := approveScript.Run(ctx, c.l.rdb, []string{metaKey(b.ID), auditKey(b.ID)}, argv...).StringSlice()
		if err != nil {
			_ = c.unreserveDaily(ctx, day, units)
			return b, fmt.Errorf("ledger: approve %s: %w", b.ID, err)
		}
		if res[0] == "reserve" && day == "" {
			if day, units, err = c.ReserveDaily(ctx, b.Total, a.DailyLimit, b.Scale); err != nil {
				return b, err
			}
			argv[4] = "1"
			continue
		}
		if res[0] != "approved" {
			_ = c.unreserveDaily(ctx, day, units) // not the last approval after all
		}
		now, _ := c.l.Batch(ctx, b.ID)
		return now, approveRefusal(b, a.By, res)
	}
	_ = c.unreserveDaily(ctx, day, units)
	return b, fmt.Errorf("ledger: approve %s: the approval script asked twice for the day's sum", b.ID)
}

// approveRefusal is the error of approveScript's reply res (nil for an
// approval recorded, the last or not).
func approveRefusal(b Batch, by string, res []string) error {
	switch res[0] {
	case "approved", "partial":
		return nil
	case "expired":
		return fmt.Errorf("batch %s: the approval request expired at %s: %w", b.ID,
			msTime(res[1]).UTC().Format(time.RFC3339), ErrExpired)
	case "dup":
		return fmt.Errorf("batch %s: %s approved it already, and a second approval by the same person does not count (%s): %w",
			b.ID, by, b.ApprovalProgress(), ErrAlreadyApproved)
	case "phase":
		ph := res[1]
		if ph == "" {
			ph = "gone"
		}
		return fmt.Errorf("batch %s is %s: %w", b.ID, ph, ErrNotAwaiting)
	}
	return fmt.Errorf("ledger: approve %s: unexpected reply %q", b.ID, res)
}

// HoldBatchFor ends a load under approval as HoldBatch does, and records
// when its approval request expires: expiry after now (Redis's clock);
// zero or less: never. The reconciler discards a batch whose request
// expired (ExpireBatch).
func (c Controls) HoldBatchFor(ctx context.Context, id, reason string, expiry time.Duration) error {
	reason = scrub.Text(reason, 0)
	ms := max(expiry.Milliseconds(), 0)
	err := holdScript.Run(ctx, c.l.rdb, []string{metaKey(id), auditKey(id)}, reason, c.l.actor, ms).Err()
	if err != nil {
		return fmt.Errorf("ledger: hold batch %s for approval: %w", id, err)
	}
	return nil
}

// expireScript discards a batch awaiting approval whose approval request
// expired (its recorded expat passed on Redis's clock) and audits it.
//
//	KEYS[1] meta  KEYS[2] audit
//	ARGV[1] actor  ARGV[2] reason
//
// Replies 1 when it discarded the batch, 0 otherwise.
var expireScript = script(lifecycle.RoleReconciler, `
if redis.call('HGET', KEYS[1], 'phase') ~= 'awaiting_approval' then return 0 end
local expat = tonumber(redis.call('HGET', KEYS[1], 'expat') or '0') or 0
local now = nowms()
if expat <= 0 or tonumber(now) < expat then return 0 end
redis.call('HSET', KEYS[1], 'phase', 'discarded', 'dby', ARGV[1], 'dat', now, 'note', ARGV[2], 'expired', 1)
redis.call('XADD', KEYS[2], '*', 't', now, 'actor', ARGV[1], 'ext', '', 'from', 'awaiting_approval',
  'to', 'discarded', 'note', ARGV[2])
return 1
`)

// Expired is what ExpireBatch did.
type Expired struct {
	Batch     Batch // as it is now
	Reason    string
	Discarded bool // this call discarded it (false: it had been, and its payouts are being cancelled)
	Cancelled int  // payouts cancelled by this call
}

// ExpireBatch discards batch id if its approval request expired (its
// ExpiresAt passed on Redis's clock) while it still awaits approval, by
// compare-and-set against the approvals: of an approval and the expiry
// racing, exactly one wins. Every queued payout is then cancelled, as by
// the reconciler; a batch discarded by an earlier call whose payouts were
// not all cancelled (that call died) is taken up again. ok is false when
// the batch did not expire (or was approved or discarded by a person).
func (c Controls) ExpireBatch(ctx context.Context, id string) (Expired, bool, error) {
	b, err := c.l.Batch(ctx, id)
	if err != nil {
		return Expired{}, false, err
	}
	x := Expired{Batch: b, Reason: ExpiryReason(b.Expiry)}
	switch {
	case b.Phase == lifecycle.PhaseAwaiting && !b.ExpiresAt.IsZero():
		n, err := expireScript.Run(ctx, c.l.rdb, []string{metaKey(id), auditKey(id)}, ExpiryActor, x.Reason).Int()
		if err != nil {
			return x, false, fmt.Errorf("ledger: expire %s: %w", id, err)
		}
		if n != 1 {
			return x, false, nil
		}
		x.Discarded = true
	case b.Phase == lifecycle.PhaseDiscarded && b.ExpiredDiscard:
	default:
		return x, false, nil
	}
	if x.Cancelled, err = c.l.cancelQueuedAs(ctx, id, cancelExpiredScript, ExpiryActor, "batch discarded: "+x.Reason); err != nil {
		return x, true, err
	}
	x.Batch, err = c.l.Batch(ctx, id)
	return x, true, err
}

// ExpiryReason is the reason a batch whose approval request expired after
// d is discarded with: "approval expired after 7 days".
func ExpiryReason(d time.Duration) string {
	return "approval expired after " + Days(d)
}

// Days says d in days when it is whole days ("7 days", "1 day"), else as
// time.Duration does ("36h0m0s").
func Days(d time.Duration) string {
	const day = 24 * time.Hour
	switch {
	case d > 0 && d%day == 0 && d == day:
		return "1 day"
	case d > 0 && d%day == 0:
		return strconv.FormatInt(int64(d/day), 10) + " days"
	}
	return d.String()
}

// cancelExpiredScript is cancelScript as the reconciler: the queued
// payouts of a batch whose approval request expired.
var cancelExpiredScript = script(lifecycle.RoleReconciler, luaReplay+cancelLua)
