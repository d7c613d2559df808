package cli

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/vault"
	"github.com/rs/zerolog"
)

// The checks a worker passes before it takes a task, so that a worker
// configured unlike the fleet refuses to start instead of finding out on
// a payout: its data key must open what the loader seals (the key
// fingerprint the loader records in the ledger), and the PSP must take
// its token (the --check query). See docs/operations.md, "Workers".

// startCheckFlags say which start-up checks a worker skips.
type startCheckFlags struct {
	skipPSP bool
}

func (f *startCheckFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.skipPSP, "skip-psp-check", false, "start without first proving that the PSP takes the token (the --check query); for a start while the PSP is knowingly unreachable. A refused token then stops this worker at its first request")
}

// startChecks runs the start-up checks: a refusal is a configuration
// error (exit 2) that says what to fix.
func (f *startCheckFlags) startChecks(ctx context.Context, led *ledger.Ledger, ring *vault.Keyring, client *psp.Client, log zerolog.Logger) error {
	if err := checkDataKey(ctx, led, ring, log); err != nil {
		return err
	}
	if f.skipPSP {
		log.Warn().Msg("--skip-psp-check: the PSP token was not checked at start")
		return nil
	}
	return checkPSPAtStart(ctx, client, log)
}

// checkDataKey refuses a keyring that cannot open what the loader seals,
// as the loader recorded it (recordDataKey). A ledger where no
// loader recorded a key yet (none loaded since this check exists) is
// accepted with a warning: a card number this worker cannot open then
// stops it at that payout, the payout left as it was.
func checkDataKey(ctx context.Context, led *ledger.Ledger, ring *vault.Keyring, log zerolog.Logger) error {
	rec, found, err := readDataKeyRecord(ctx, led.Redis())
	if err != nil {
		return infraErr(err)
	}
	if !found {
		log.Warn().Strs("keyIds", ring.KeyIDs()).
			Msg("no loader has recorded its data key in the ledger yet: this worker's key is checked at the first card number it opens")
		return nil
	}
	if ring.Opens(rec.Fingerprint) {
		log.Info().Str("keyId", rec.ID).Msg("data key: this worker opens what the loader seals")
		return nil
	}
	return configErr(fmt.Errorf("%s", dataKeyRefusal(rec, ring)))
}

// dataKeyRefusal says why a worker's keyring does not fit the loader's
// key and what to do, naming key ids only.
func dataKeyRefusal(rec dataKeyRecord, ring *vault.Keyring) string {
	held := strings.Join(ring.KeyIDs(), ", ")
	if held == "" {
		held = "none"
	}
	at := rec.At.Format(time.RFC3339)
	switch {
	case rec.Fingerprint == vault.PlaintextFingerprint:
		return fmt.Sprintf("the loader stores card numbers unencrypted (--insecure-plaintext, recorded by %s at %s) and this worker would not open them: "+
			"pass --insecure-plaintext to the worker too, or load with a data key", rec.By, at)
	case ring.IsPlaintext():
		return fmt.Sprintf("this worker has no data key (--insecure-plaintext), but the loader seals card numbers with key %s (recorded by %s at %s): "+
			"give the worker that key (PAYOUT_DATA_KEY or --data-key-file)", rec.ID, rec.By, at)
	}
	return fmt.Sprintf("this worker's data key cannot open the card numbers the loader seals: the loader seals with key %s (recorded by %s at %s), "+
		"this worker holds key(s) %s. Give it the loader's key (PAYOUT_DATA_KEY or --data-key-file; during a rotation the other one in PAYOUT_DATA_KEYS_OLD)",
		rec.ID, rec.By, at, held)
}

// checkPSPAtStart runs the --check query: a token the PSP refuses, or a
// --psp-url that is not the PSP, refuses the start; a PSP that does not
// answer now is only a warning (requests are retried as usual).
func checkPSPAtStart(ctx context.Context, client *psp.Client, log zerolog.Logger) error {
	res := client.CheckAPI(ctx)
	switch res.Verdict {
	case psp.APIAccepted:
		log.Info().Str("check", res.Message).Msg("PSP check at start: the token was accepted")
		return nil
	case psp.APITokenRefused:
		return configErr(fmt.Errorf("PSP check at start: %s; fix PAYOUT_PSP_TOKEN or --psp-token-file (or --skip-psp-check to start anyway)", res.Message))
	case psp.APINotPSP:
		return configErr(fmt.Errorf("PSP check at start failed: %s (or --skip-psp-check to start anyway)", res.Message))
	}
	log.Warn().Str("check", res.Message).Msg("PSP check at start inconclusive (no answer): starting; a refused token will stop this worker at its first request")
	return nil
}

// recordDataKey records, for the workers' start-up check, the data key a
// loader seals with (never the key: its id and fingerprint).
func recordDataKey(ctx context.Context, led *ledger.Ledger, ring *vault.Keyring) error {
	if err := writeDataKeyRecord(ctx, led, ring.KeyID(), ring.Fingerprint()); err != nil {
		return infraErr(err)
	}
	return nil
}
