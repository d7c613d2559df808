package chaos

import (
	"errors"
	"flag"
	"strings"
	"testing"
	"time"
)

func TestConfigsAreValid(t *testing.T) {
	for name, c := range map[string]Config{"default": DefaultConfig(), "short": ShortConfig(), "broken": BrokenConfig(), "broken-replay": BrokenReplayConfig()} {
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if c := BrokenConfig(); !c.Broken || c.Rows > 500 {
		t.Errorf("broken config: broken=%t rows=%d", c.Broken, c.Rows)
	}
	if c := BrokenReplayConfig(); !c.BrokenReplay || c.Broken || !c.H2 || c.H2Reset == 0 || c.Rows > 500 {
		t.Errorf("broken-replay config: %+v", c)
	}
	if c := DefaultConfig(); c.Rows != 10000 || c.Workers != 3 || c.PAmbiguous != 0.25 || c.PRefuse != 0.1 {
		t.Errorf("default config drifted from the issue: %+v", c)
	}
}

func TestValidateRefuses(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Config)
	}{
		{"no rows", func(c *Config) { c.Rows = 0 }},
		{"more files than rows", func(c *Config) { c.Rows, c.Files = 2, 3 }},
		{"no workers", func(c *Config) { c.Workers = 0 }},
		{"negative kill interval", func(c *Config) { c.KillEvery = -time.Second }},
		{"loader never runs", func(c *Config) { c.LoaderEvery = 0 }},
		{"probability above 1", func(c *Config) { c.PAmbiguous = 1.5 }},
		{"bad outage", func(c *Config) { c.Outage = "20s" }},
		{"no PSP timeout", func(c *Config) { c.PSPTimeout = 0 }},
		{"no deadline", func(c *Config) { c.Deadline = 0 }},
		{"absence counted before a create times out", func(c *Config) { c.AbsentSpacing = c.PSPTimeout / 2 }},
		{"reconciler grace shorter than a create", func(c *Config) { c.ReconcileGrace = c.PSPTimeout }},
		{"deletes without the reconciler", func(c *Config) { c.ReconcileInterval = 0 }},
		{"reply drop above one half", func(c *Config) { c.RedisReplyDrop = 0.9 }},
		{"resets without HTTP/2", func(c *Config) { c.H2 = false }},
		{"both broken builds", func(c *Config) { c.Broken, c.BrokenReplay = true, true }},
	}
	for _, tt := range tests {
		c := ShortConfig()
		tt.change(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", tt.name)
		}
	}
}

func TestFlagsAndEnvironment(t *testing.T) {
	c := DefaultConfig()
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	RegisterFlags(fs, &c)
	if err := fs.Parse([]string{"--rows", "300", "--outage="}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"PAYOUT_CHAOS_ROWS":       "999", // the flag wins
		"PAYOUT_CHAOS_KILL_EVERY": "750ms",
		"PAYOUT_CHAOS_BROKEN":     "true",
	}
	if err := ApplyEnv(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if c.Rows != 300 || c.KillEvery != 750*time.Millisecond || !c.Broken || c.Outage != "" || c.Files != 10 {
		t.Errorf("got rows=%d kill=%s broken=%t outage=%q files=%d", c.Rows, c.KillEvery, c.Broken, c.Outage, c.Files)
	}
	env = map[string]string{"PAYOUT_CHAOS_WORKERS": "three"}
	err := ApplyEnv(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err == nil || !strings.Contains(err.Error(), "PAYOUT_CHAOS_WORKERS") {
		t.Errorf("bad environment value: %v", err)
	}
}

func TestFigures(t *testing.T) {
	f := Figures{Payouts: 10000, Created: 9900, Paid: 8900, Failed: 1000, Rejected: 100, Ambiguous: 3000, WorkerKills: 12,
		RedisRestarts: 1, TokenRotations: 1, ForgedCallbacks: 600, Elapsed: 161234 * time.Millisecond}
	want := "payouts=10000 created=9900 paid=8900 failed=1000 rejected=100 needs_review=0 ambiguous=3000 worker_kills=12 redis_restarts=1 token_rotations=1 h2_resets=0 redis_reply_drops=0 tasks_deleted=0 interrupted_loads=0 orphaned_tasks=0 repaired=0 forged_callbacks=600 approved=0 cancelled=0 duplicates=0 lost=0 outcome_mismatches=0 leaks=0 mismatches=0 audit_mismatches=0 elapsed=2m41.2s"
	if f.String() != want {
		t.Errorf("got  %s\nwant %s", f, want)
	}
	if err := f.Err(); err != nil {
		t.Errorf("clean figures: %v", err)
	}
	for _, bad := range []Figures{{Duplicates: 1}, {Lost: 2}, {Leaks: 3}, {Mismatches: 4}, {OutcomeMismatches: 5}} {
		err := bad.Err()
		if !errors.Is(err, ErrUnsafe) {
			t.Errorf("%+v: got %v, want ErrUnsafe", bad, err)
		}
	}
	if err := (Figures{Duplicates: 2, Leaks: 1}).Err(); err == nil || !strings.Contains(err.Error(), "duplicates=2 leaks=1") {
		t.Errorf("error does not name the figures: %v", err)
	}
}

// TestBrokenRunsBuildTheHarnessBinaries: a broken run's workers are the
// harness's broken payout; the worker whose clock is off is always the
// skewed-clock harness command (ClockPkg), a safe worker: the broken
// ones beside it make the duplicates the run must catch.
func TestBrokenRunsBuildTheHarnessBinaries(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  func(*Config)
		want string
	}{
		{"safe", func(*Config) {}, "./cmd/payout"},
		{"broken", func(c *Config) { c.Broken = true }, SkipCheckPkg},
		{"broken replay", func(c *Config) { c.BrokenReplay = true }, ReplayPkg},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ShortConfig()
			c.ClockOffset = time.Minute
			tc.cfg(&c)
			pkgs := map[string]string{}
			for _, b := range binaries(c) {
				pkgs[b.Name] = b.Pkg
			}
			if pkgs["payout"] != tc.want || pkgs["payout-clock"] != ClockPkg {
				t.Errorf("payout from %q, payout-clock from %q, want %q and %q", pkgs["payout"], pkgs["payout-clock"], tc.want, ClockPkg)
			}
			if pkgs["psp-sandbox"] != "./cmd/psp-sandbox" {
				t.Errorf("psp-sandbox from %q", pkgs["psp-sandbox"])
			}
		})
	}
}
