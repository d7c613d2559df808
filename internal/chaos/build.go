package chaos

import (
	"os"

	"github.com/acme/payout/internal/testenv/gobuild"
)

// UnsafeTag is the build tag of the deliberately broken worker that POSTs
// again when a redelivered create finds its payout in submitting.
const UnsafeTag = "payout_unsafe_skip_submitting_check"

// ReplayTag is the build tag of the deliberately broken worker whose HTTP
// transport may replay a create after a stream reset (internal/psp).
const ReplayTag = "payout_unsafe_replayable_create"

// ClockPkg is the harness binary of the worker whose task clock is off by
// ClockEnv: the payout command line with queue.WithClock injected
// (cli.MainWith). No build tag: the product cannot be built with it.
const ClockPkg = "./internal/chaos/payoutclock"

// ClockEnv is the environment variable the ClockPkg binary reads its
// offset from.
const ClockEnv = "CHAOS_CLOCK_OFFSET"

// binaries lists what a run with c builds: payout (with the broken tags
// asked for), payout-clock (ClockPkg, the same tags) when one worker's
// clock is off, and psp-sandbox.
func binaries(c Config) []gobuild.Target {
	var tags []string
	if c.Broken {
		tags = append(tags, UnsafeTag)
	}
	if c.BrokenReplay {
		tags = append(tags, ReplayTag)
	}
	bins := []gobuild.Target{{Name: "payout", Pkg: "./cmd/payout", Tags: tags}}
	if c.ClockOffset != 0 {
		bins = append(bins, gobuild.Target{Name: "payout-clock", Pkg: ClockPkg, Tags: tags})
	}
	return append(bins, gobuild.Target{Name: "psp-sandbox", Pkg: "./cmd/psp-sandbox"})
}

// writeSecret writes a file readable by the owner only, through a rename,
// so that a reader sees the old content or the new, never half.
func writeSecret(path, content string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
