package worker

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/vault"
	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// nopPSP is a PSP for tests that send no request.
type nopPSP struct{ PSP }

func TestConfigValidate(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	deps := func(c Config) Config {
		c.Redis, c.Ledger, c.PSP, c.Opener = rdb, ledger.New(rdb), nopPSP{}, vault.Ephemeral()
		return c
	}
	tests := []struct {
		name string
		cfg  Config
		want []string // the fields reported, in order
	}{
		{"zero tuning takes the defaults", deps(Config{}), nil},
		{"the defaults", deps(DefaultConfig()), nil},
		{"no dependencies", Config{}, []string{"Redis", "Ledger", "PSP", "Opener"}},
		{"negative counts", deps(Config{Concurrency: -1, Rate: -5, MaxCreateRetries: -1}), []string{"Concurrency", "Rate", "MaxCreateRetries"}},
		{"negative policy", deps(Config{Policy: decide.CheckPolicy{AbsentChecks: -2, AbsentSpacing: -time.Second, MaxCreates: -1, MaxFaults: -3}}),
			[]string{"Policy.AbsentChecks", "Policy.MaxCreates", "Policy.MaxFaults", "Policy.AbsentSpacing"}},
		{"negative durations", deps(Config{StatusDelay: -1, ShutdownTimeout: -1, PollInterval: -time.Second}),
			[]string{"StatusDelay", "ShutdownTimeout", "PollInterval"}},
		{"bad outcome", deps(Config{Outcome: OutcomePolicy{Window: -time.Hour, Intervals: []time.Duration{time.Second, 0, -time.Second}}}),
			[]string{"Outcome.Window", "Outcome.Intervals[1]", "Outcome.Intervals[2]"}},
		{"negative reconcile and replicas", deps(Config{WaitReplicas: -1, Notify: NotifyConfig{Concurrency: -1}}),
			[]string{"WaitReplicas", "Notify.Concurrency"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			var got []string
			var errs []error
			if err != nil {
				errs = err.(interface{ Unwrap() []error }).Unwrap()
			}
			for _, e := range errs {
				var fe *FieldError
				if !errors.As(e, &fe) {
					t.Fatalf("%v (%T) is not a *FieldError", e, e)
				}
				got = append(got, fe.Field)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("Validate reported %q, want %q\n%v", got, tt.want, err)
			}
			_, nerr := New(tt.cfg)
			if (nerr == nil) != (tt.want == nil) {
				t.Fatalf("New: %v, want an error: %v", nerr, tt.want != nil)
			}
		})
	}
}

// TestDefaultAbsenceCoversTheStatusLag: with the default K and D, a
// stored order answering 404 for DefaultStatusLag (5 minutes) is never
// confirmed absent (issue 38: D of one minute paid twice a PSP lagging
// more than that).
func TestDefaultAbsenceCoversTheStatusLag(t *testing.T) {
	p := DefaultConfig().Policy
	if covered := time.Duration(p.AbsentChecks-1) * p.AbsentSpacing; covered < DefaultStatusLag || DefaultStatusLag < 5*time.Minute {
		t.Fatalf("(K-1) x D = (%d-1) x %v = %v, want at least %v (and that at least 5m)", p.AbsentChecks, p.AbsentSpacing, covered, DefaultStatusLag)
	}
}

func TestDefaultsOnlyForZeroValues(t *testing.T) {
	c := Config{Concurrency: 3, Policy: decide.CheckPolicy{AbsentSpacing: 0}}.withDefaults()
	d := DefaultConfig()
	if c.Concurrency != 3 || c.StatusDelay != d.StatusDelay || c.Policy.AbsentChecks != d.Policy.AbsentChecks ||
		c.Policy.AbsentSpacing != 0 || c.Notify.Concurrency != defaultNotifyConcurrency || c.Metrics == nil {
		t.Fatalf("withDefaults: %+v", c)
	}
	if n := (Config{Concurrency: -1}).withDefaults().Concurrency; n != -1 {
		t.Fatalf("a negative concurrency became %d: only zero values take defaults", n)
	}
}
