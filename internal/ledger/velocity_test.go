package ledger

import (
	"context"
	"testing"
	"time"

	"github.com/acme/payout/internal/ledger/keys"
	"github.com/acme/payout/internal/money"
)

// TestVelocityCount pins the verdicts of the velocity counters: rows of
// one destination in order, each counted only within both limits; a row
// counted before is not counted again; force counts over the limit; the
// day is Redis's (UTC) and the counters expire after it; Uncount gives a
// count back once.
func TestVelocityCount(t *testing.T) {
	ctx := context.Background()
	l, clk := newTestLedger(t)
	v := l.Velocity()
	day, err := v.Day(ctx)
	if err != nil || day != "2026-11-23" {
		t.Fatalf("day %q %v", day, err)
	}
	row := func(tag, ext, amount string) VelocityRow {
		return VelocityRow{Tag: tag, ExternalID: ext, Amount: money.MustParse(amount)}
	}
	lim := VelocityLimits{Count: 3, Amount: money.MustParse("100")}
	tests := []struct {
		name  string
		rows  []VelocityRow
		force bool
		want  []int
	}{
		{"within", []VelocityRow{row("t1", "A", "40"), row("t1", "B", "40"), row("t2", "C", "99")},
			false, []int{VelocityCounted, VelocityCounted, VelocityCounted}},
		{"again: counted before", []VelocityRow{row("t1", "A", "40")}, false, []int{VelocityBefore}},
		{"over the amount, a smaller one after it fits", []VelocityRow{row("t1", "D", "30"), row("t1", "E", "20")},
			false, []int{VelocityOverAmount, VelocityCounted}},
		{"over the count", []VelocityRow{row("t1", "F", "1")}, false, []int{VelocityOverCount}},
		{"a person's release: counted whatever the limit", []VelocityRow{row("t1", "F", "1")}, true, []int{VelocityCounted}},
		{"another destination is its own", []VelocityRow{row("t2", "G", "1"), row("t2", "H", "0.01")},
			false, []int{VelocityCounted, VelocityOverAmount}},
	}
	for _, tt := range tests {
		got, err := v.Count(ctx, day, "b", tt.rows, lim, tt.force)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		for i, r := range got {
			if r.Verdict != tt.want[i] {
				t.Errorf("%s: row %d verdict %d (count %d, sum %s), want %d", tt.name, i, r.Verdict, r.Count, r.Sum, tt.want[i])
			}
		}
	}
	k := keys.Velocity(day, "t1")
	if n, _ := l.rdb.HGet(ctx, k, "#n").Result(); n != "4" {
		t.Errorf("t1 count %s, want 4", n)
	}
	for range 2 { // once
		if err := v.Uncount(ctx, "b", []string{"A"}, []string{VelocityMark(day, "t1")}); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := l.rdb.HGet(ctx, k, "#n").Result(); n != "3" {
		t.Errorf("t1 count after giving A back %s, want 3", n)
	}
	if ttl := l.rdb.TTL(ctx, k).Val(); ttl <= 24*time.Hour || ttl > velocityTTL {
		t.Errorf("ttl %s, want past the day, at most %s", ttl, velocityTTL)
	}
	clk.add(14 * time.Hour) // the next UTC day: counters start again
	if next, _ := v.Day(ctx); next != "2026-11-24" {
		t.Errorf("next day %q", next)
	}
}

// TestVelocityOff: zero limits count every row and refuse none.
func TestVelocityOff(t *testing.T) {
	l, _ := newTestLedger(t)
	got, err := l.Velocity().Count(context.Background(), "2026-11-23", "b",
		[]VelocityRow{{Tag: "t", ExternalID: "A", Amount: money.MustParse("1000000")}, {Tag: "t", ExternalID: "B", Amount: money.MustParse("1")}}, VelocityLimits{}, false)
	if err != nil || !got[0].Within() || !got[1].Within() {
		t.Fatalf("%+v %v", got, err)
	}
}
