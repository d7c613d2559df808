package chaos

import (
	"os"

	"github.com/acme/payout/internal/proof/testenv/gobuild"
)

// SkipCheckPkg is the deliberately broken payout whose worker POSTs again
// when a redelivered create finds its payout in submitting.
const SkipCheckPkg = "./internal/proof/cmd/payout-skipcheck"

// ReplayPkg is the deliberately broken payout whose HTTP transport may
// replay a create after a stream reset (internal/psp).
const ReplayPkg = "./internal/proof/cmd/payout-replay"

// ClockPkg is the harness binary of the worker whose task clock is off by
// ClockEnv: the payout command line with queue.WithClock injected
// (cli.MainWith). No build tag: the product cannot be built with it.
const ClockPkg = "./internal/proof/chaos/payoutclock"

// ClockEnv is the environment variable the ClockPkg binary reads its
// offset from.
const ClockEnv = "CHAOS_CLOCK_OFFSET"

// binaries lists what a run with c builds: payout (the broken one of
// SkipCheckPkg or ReplayPkg when asked for), payout-clock (ClockPkg, a
// safe worker whose task clock is off) when one worker's clock is off, and
// psp-sandbox.
func binaries(c Config) []gobuild.Target {
	pkg := "./cmd/payout"
	if c.Broken {
		pkg = SkipCheckPkg
	}
	if c.BrokenReplay {
		pkg = ReplayPkg
	}
	bins := []gobuild.Target{{Name: "payout", Pkg: pkg}}
	if c.ClockOffset != 0 {
		bins = append(bins, gobuild.Target{Name: "payout-clock", Pkg: ClockPkg})
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
