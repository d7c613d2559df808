package ledger

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/money"
)

// infoRoundTrip registers payouts with informational values of every
// size, through Register and RegisterLocked (a loader's, under the load
// lock), and reads them back; it returns the payout keys.
func infoRoundTrip(t *testing.T, l *Ledger) []string {
	t.Helper()
	ctx := context.Background()
	long := strings.Repeat("Ёж ", 50) // multi-byte runes across 64-byte chunks
	infos := [][]string{nil, {"", ""}, {"Ivanov I.I.", "2026-11-30", ""}, {"Ivanov Ivan Ivanovich", "", long}, {"x"}}
	var keys []string
	for i, register := range []string{"plain", "locked"} {
		batch := "b" + register
		var ps []NewPayout
		for j, info := range infos {
			id := "PO-" + register + "-" + string(rune('a'+j))
			ps = append(ps, NewPayout{Line: j + 2, ExternalID: id, Amount: money.MustParse("1"), Destination: "telecom MTS", Telecom: "MTS", Info: PackInfo(info)})
			keys = append(keys, payoutKey(batch, id))
		}
		if i == 0 {
			if _, err := l.Register(ctx, batch, ps, 2); err != nil {
				t.Fatal(err)
			}
		} else {
			if _, _, err := l.BeginBatch(ctx, Batch{ID: batch, File: "f.csv", LoadedAt: time.Now(), Total: money.Zero, Scale: 2}); err != nil {
				t.Fatal(err)
			}
			if ok, err := l.Locks().LockLoad(ctx, batch, "me", time.Minute); err != nil || !ok {
				t.Fatal(ok, err)
			}
			if _, err := l.RegisterLocked(ctx, batch, "me", ps, 2); err != nil {
				t.Fatal(err)
			}
		}
		for j, p := range ps {
			got, err := l.Get(ctx, batch, p.ExternalID)
			if err != nil {
				t.Fatal(err)
			}
			want := slices.Clone(infos[j])
			for len(want) > 0 && want[len(want)-1] == "" {
				want = want[:len(want)-1]
			}
			if u := UnpackInfo(got.Info); !slices.Equal(u, want) && !(len(u) == 0 && len(want) == 0) {
				t.Errorf("%s %s: info %q, want %q", register, p.ExternalID, u, want)
			}
			n, _ := l.rdb.HLen(ctx, payoutKey(batch, p.ExternalID)).Result()
			if j == 0 || j == 1 {
				if m := l.rdb.HGetAll(ctx, payoutKey(batch, p.ExternalID)).Val(); m["info"] != "" {
					t.Errorf("%s %s: an info field for no values (%d fields)", register, p.ExternalID, n)
				}
			}
		}
	}
	return keys
}

func TestInfoRoundTrip(t *testing.T) {
	l, _ := newTestLedger(t)
	infoRoundTrip(t, l)
}
