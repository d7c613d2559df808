package ledger

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/acme/payout/internal/ledger/keys"
)

// claimed makes batch the owner of ids.
func claimed(t *testing.T, l *Ledger, batch string, ids ...string) {
	t.Helper()
	if _, err := l.Claims().Claim(context.Background(), batch, ids); err != nil {
		t.Fatal(err)
	}
}

// archived makes batch the owner of ids and archives its claims as the
// archiver does, the id window ending window after clk's time.
func archived(t *testing.T, l *Ledger, clk *fakeClock, window time.Duration, batch string, ids ...string) {
	t.Helper()
	claimed(t, l, batch, ids...)
	if n, err := l.Claims().ArchiveClaims(context.Background(), batch, ids, clk.t.Add(window), clk.t); err != nil || n != len(ids) {
		t.Fatalf("ArchiveClaims = %d, %v; want %d", n, err, len(ids))
	}
}

// TestArchivedClaimsRefuseThenExpire: an archived batch's claims refuse
// the ids to another batch (Owners, Claim) until the end of the day the
// window ends, then let them go; a taken live key of an archived id is
// given back.
func TestArchivedClaimsRefuseThenExpire(t *testing.T) {
	ctx := context.Background()
	l, clk := newTestLedger(t)
	ids := []string{"A1", "A2", "A3"}
	window := 90 * 24 * time.Hour
	archived(t, l, clk, window, "old", ids...)
	for _, tc := range []struct {
		after time.Duration
		owned bool
	}{
		{0, true},
		{window - time.Hour, true},
		{window, true},
		{window + 24*time.Hour + time.Second, false},
	} {
		clk.t = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
		clk.add(tc.after)
		own, err := l.Claims().Owners(ctx, "new", ids)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(own) == 3 && own["A2"] == "old"; got != tc.owned {
			t.Fatalf("after %v: Owners = %v, want owned %v", tc.after, own, tc.owned)
		}
		taken, owners, err := l.Claims().ClaimTaken(ctx, "new", ids)
		if err != nil {
			t.Fatal(err)
		}
		if taken[1] == tc.owned || (owners["A2"] == "old") != tc.owned {
			t.Fatalf("after %v: ClaimTaken = %v %v, want owned %v", tc.after, taken, owners, tc.owned)
		}
		if tc.owned && l.rdb.Exists(ctx, keys.OwnerOf("A2")).Val() != 0 {
			t.Fatalf("after %v: the live key of an archived id was kept", tc.after)
		}
	}
}

// TestArchivedClaimsGenerations: claims beyond a generation's fill go to
// a new generation with twice the buckets; every one is still found.
func TestArchivedClaimsGenerations(t *testing.T) {
	ctx := context.Background()
	l, clk := newTestLedger(t)
	n := claimsPerBucket*claimBuckets0 + 500
	var ids []string
	for i := 0; i < n; i++ {
		ids = append(ids, fmt.Sprintf("G-%06d", i))
	}
	archived(t, l, clk, time.Hour, "old", ids...)
	gens, err := l.Claims().claimGens(ctx, claimDay(clk.t))
	if err != nil || len(gens) != 2 {
		t.Fatalf("generations %v, %v", gens, err)
	}
	own, err := l.Claims().Owners(ctx, "new", ids)
	if err != nil || len(own) != n {
		t.Fatalf("Owners found %d of %d, %v", len(own), n, err)
	}
}

// TestArchivedClaimsCheckedForOwnLiveKey: a live key the caller's batch
// holds (a run that took it and died before the archive check or the
// give-back) does not hide an archived batch's claim: the rerun is told
// the archived owner and the live key is given back.
func TestArchivedClaimsCheckedForOwnLiveKey(t *testing.T) {
	ctx := context.Background()
	l, clk := newTestLedger(t)
	archived(t, l, clk, time.Hour, "old", "X")
	if err := l.rdb.Set(ctx, keys.OwnerOf("X"), "new", 0).Err(); err != nil {
		t.Fatal(err)
	}
	own, err := l.Claims().Owners(ctx, "new", []string{"X"})
	if err != nil || own["X"] != "old" {
		t.Fatalf("Owners = %v, %v; want X owned by old", own, err)
	}
	if v := l.rdb.Get(ctx, keys.OwnerOf("X")).Val(); v != "new" {
		t.Fatalf("Owners wrote: live key is %q", v)
	}
	taken, owners, err := l.Claims().ClaimTaken(ctx, "new", []string{"X"})
	if err != nil || taken[0] || owners["X"] != "old" {
		t.Fatalf("ClaimTaken = %v, %v, %v; want not taken, X owned by old", taken, owners, err)
	}
	if l.rdb.Exists(ctx, keys.OwnerOf("X")).Val() != 0 {
		t.Fatal("the live key of an archived id was kept")
	}
}

// beforeGetHook runs fn once, before the first pipeline that GETs key.
type beforeGetHook struct {
	key  string
	fn   func()
	done bool
}

func (h *beforeGetHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *beforeGetHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return next
}
func (h *beforeGetHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if a := c.Args(); !h.done && len(a) == 2 && a[0] == "get" && a[1] == h.key {
				h.done = true
				h.fn()
			}
		}
		return next(ctx, cmds)
	}
}

// TestClaimRetriesVanishedLiveKey: a live key that vanishes between the
// SETNX that met it and the reading of its owner is claimed again, not
// taken for batch's own.
func TestClaimRetriesVanishedLiveKey(t *testing.T) {
	ctx := context.Background()
	l, clk := newTestLedger(t)
	claimed(t, l, "other", "V")
	l.rdb.AddHook(&beforeGetHook{key: keys.OwnerOf("V"), fn: func() { clk.m.Del(keys.OwnerOf("V")) }})
	taken, owners, err := l.Claims().ClaimTaken(ctx, "new", []string{"V"})
	if err != nil || !taken[0] || owners != nil {
		t.Fatalf("ClaimTaken = %v, %v, %v; want taken", taken, owners, err)
	}
	if v := l.rdb.Get(ctx, keys.OwnerOf("V")).Val(); v != "new" {
		t.Fatalf("live key is %q, want new", v)
	}
}

// failCmdHook fails, after the pipeline ran, each command match selects:
// Exec reports only the first failed command's error, here a redis.Nil
// before it.
type failCmdHook struct{ match func(args []any) bool }

func (h failCmdHook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h failCmdHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h failCmdHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			if h.match(c.Args()) {
				if s, ok := c.(*redis.StringCmd); ok {
					s.SetVal("")
				}
				c.SetErr(errors.New("injected fault"))
			}
		}
		return err
	}
}

// TestOwnersFailsOnErrorAfterNil: a failed lookup after a missing key in
// the same pipeline is an error, not "no claim".
func TestOwnersFailsOnErrorAfterNil(t *testing.T) {
	for _, tc := range []struct {
		name     string
		archived bool // X's claim archived, else live
		match    func(args []any) bool
	}{
		{"live", false, func(a []any) bool { return len(a) == 2 && a[0] == "get" && a[1] == keys.OwnerOf("X") }},
		{"archived", true, func(a []any) bool { return len(a) == 3 && a[0] == "hget" && a[2] == "X" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			l, clk := newTestLedger(t)
			if tc.archived {
				archived(t, l, clk, time.Hour, "old", "X")
			} else {
				claimed(t, l, "old", "X")
			}
			l.rdb.AddHook(failCmdHook{match: tc.match})
			if own, err := l.Claims().Owners(ctx, "new", []string{"M", "X"}); err == nil {
				t.Fatalf("Owners = %v, nil; want the injected error", own)
			}
			if taken, own, err := l.Claims().ClaimTaken(ctx, "new", []string{"M", "X"}); err == nil {
				t.Fatalf("ClaimTaken = %v, %v, nil; want the injected error", taken, own)
			}
		})
	}
}

// TestClaimGenerationsDroppedOnlyByArchiver: a lookup skips an expired
// generation but writes nothing (a reader's stale drop could remove a
// generation the archiver just reused); the archiver drops it, and keeps
// one whose day was raised meanwhile.
func TestClaimGenerationsDroppedOnlyByArchiver(t *testing.T) {
	ctx := context.Background()
	l, clk := newTestLedger(t)
	archived(t, l, clk, time.Hour, "old", "X")
	clk.add(48 * time.Hour)
	before := l.rdb.HGetAll(ctx, claimGensKey()).Val()
	if own, err := l.Claims().Owners(ctx, "new", []string{"X"}); err != nil || len(own) != 0 {
		t.Fatalf("Owners = %v, %v; want none (expired)", own, err)
	}
	if _, _, err := l.Claims().ClaimTaken(ctx, "new", []string{"X"}); err != nil {
		t.Fatal(err)
	}
	if after := l.rdb.HGetAll(ctx, claimGensKey()).Val(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("a lookup changed the generations: %v, then %v", before, after)
	}
	today := claimDay(clk.t)
	// Generation 0 reused (its day raised) after a stale read: it stays.
	if err := l.rdb.HSet(ctx, claimGensKey(), "t:0", today, "t:1", today-1, "n:1", 5).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Claims().dropClaimGens(ctx, today); err != nil {
		t.Fatal(err)
	}
	got := l.rdb.HGetAll(ctx, claimGensKey()).Val()
	if _, ok := got["t:0"]; !ok || len(got) != 2 {
		t.Fatalf("after dropping: %v, want generation 0 only", got)
	}
}

// TestSweepArchivedClaims: the daily sweep drops the expired claims of a
// generation no longer written to (writes clean only the buckets they
// touch) and keeps its live ones, keeps a claim through its last day, never
// judges by a clock ahead of Redis's, runs once a day, keeps each
// generation's count of the claims it holds, and deletes the buckets of a
// generation whose claims all expired.
func TestSweepArchivedClaims(t *testing.T) {
	ctx := context.Background()
	l, clk := newTestLedger(t)
	full := int64(claimsPerBucket) * int64(claimBucketCount(0))
	archived(t, l, clk, 24*time.Hour, "old", "O1", "O2")
	archived(t, l, clk, 10*24*time.Hour, "mid", "M1", "M2")
	// Generation 0 counts as full: the next claims go to generation 1.
	if err := l.rdb.HSet(ctx, claimGensKey(), "n:0", full).Err(); err != nil {
		t.Fatal(err)
	}
	clk.add(24 * time.Hour)
	archived(t, l, clk, 30*24*time.Hour, "new", "N1")
	// Written again (a re-run), a claim is not counted twice.
	if err := l.Claims().writeArchivedClaims(ctx, 1, []string{"N1"}, "new:"+strconv.FormatInt(claimDay(clk.t)+30, 10), claimDay(clk.t), claimDay(clk.t)+30); err != nil {
		t.Fatal(err)
	}
	dir := func() map[string]string { return l.rdb.HGetAll(ctx, claimGensKey()).Val() }
	if d := dir(); d["n:1"] != "1" || d["t:0"] == "" {
		t.Fatalf("directory = %v; want n:1 = 1 and generation 0 in use", d)
	}
	sweep := func(now time.Time, want int64) {
		t.Helper()
		if got, err := l.Claims().SweepArchivedClaims(ctx, now); err != nil || got != want {
			t.Fatalf("SweepArchivedClaims(%s) on Redis's %s = %d, %v; want %d dropped", now, clk.t, got, err, want)
		}
	}
	owners := func(want map[string]string) {
		t.Helper()
		own, err := l.Claims().Owners(ctx, "other", []string{"O1", "O2", "M1", "M2", "N1"})
		if err != nil || len(own) != len(want) {
			t.Fatalf("Owners = %v, %v; want %v", own, err, want)
		}
		for id, b := range want {
			if own[id] != b {
				t.Fatalf("Owners = %v; want %v", own, want)
			}
		}
	}
	// The old claims' last day is today: kept, by an archive clock a day
	// and a half ahead of Redis's (first, so that the sweep runs) and by
	// Redis's own.
	sweep(clk.t.Add(36*time.Hour), 0)
	if err := l.rdb.HDel(ctx, claimGensKey(), sweptField).Err(); err != nil {
		t.Fatal(err)
	}
	sweep(clk.t, 0)
	owners(map[string]string{"O1": "old", "O2": "old", "M1": "mid", "M2": "mid", "N1": "new"})

	clk.add(24*time.Hour + time.Second)
	sweep(clk.t, 2)
	owners(map[string]string{"M1": "mid", "M2": "mid", "N1": "new"})
	if l.rdb.HExists(ctx, claimBucketKey(0, "O1"), "O1").Val() {
		t.Fatal("the expired claim O1 is still held in generation 0")
	}
	if d := dir(); d["n:0"] != strconv.FormatInt(full-2, 10) || d["t:0"] == "" || d["n:1"] != "1" {
		t.Fatalf("directory = %v; want n:0 = %d, generation 0 kept, n:1 = 1", d, full-2)
	}
	sweep(clk.t, 0) // once a day

	bucketsOf := func(g int) int {
		n := 0
		for k := uint32(0); k < claimBucketCount(g); k++ {
			n += int(l.rdb.Exists(ctx, claimBucketKeyAt(g, k)).Val())
		}
		return n
	}
	clk.add(9 * 24 * time.Hour)
	sweep(clk.t, 2)
	if n := bucketsOf(0); n != 0 {
		t.Fatalf("%d buckets of generation 0 left after its last claims expired", n)
	}
	if d := dir(); d["t:0"] != "" || d["n:1"] != "1" {
		t.Fatalf("directory = %v; want generation 0 gone, n:1 = 1", d)
	}
	owners(map[string]string{"N1": "new"})
	if held, err := l.Claims().ArchivedClaimsHeld(ctx); err != nil || held != 1 {
		t.Fatalf("ArchivedClaimsHeld = %d, %v; want 1", held, err)
	}
}

// TestArchiveClaimsClockAhead: an archive whose clock is a day and a half
// ahead of Redis's, writing into the bucket of a claim on its last day (by
// Redis's clock), neither drops that claim nor forgets its generation.
func TestArchiveClaimsClockAhead(t *testing.T) {
	ctx := context.Background()
	l, clk := newTestLedger(t)
	archived(t, l, clk, 24*time.Hour, "old", "O1")
	clk.add(24 * time.Hour)
	late := ""
	for i := 0; late == ""; i++ {
		if id := fmt.Sprintf("L%d", i); claimBucketKey(0, id) == claimBucketKey(0, "O1") {
			late = id
		}
	}
	claimed(t, l, "late", late)
	if _, err := l.Claims().ArchiveClaims(ctx, "late", []string{late}, clk.t.Add(24*time.Hour), clk.t.Add(36*time.Hour)); err != nil {
		t.Fatal(err)
	}
	own, err := l.Claims().Owners(ctx, "other", []string{"O1", late})
	if err != nil || own["O1"] != "old" || own[late] != "late" {
		t.Fatalf("Owners = %v, %v; want O1 still held by old", own, err)
	}
	if d := l.rdb.HGetAll(ctx, claimGensKey()).Val(); d["n:0"] != "2" {
		t.Fatalf("directory = %v; want n:0 = 2", d)
	}
}
