package loader

import (
	"context"
	"encoding/json"
	"os"

	"github.com/acme/payout/internal/ledger"
)

// writeAuditFile writes a batch's audit trail beside its result file, one
// JSON object a line (time, actor, payout, from, to, context): what
// auditors ask for, kept with finance's files. No entry holds a card
// number: the ledger records masked destinations only, and none in the
// trail.
func (ld *Loader) writeAuditFile(ctx context.Context, path, batch string) error {
	return writeAtomic(path, func(f *os.File) error {
		enc := json.NewEncoder(f)
		return ld.ledger.Audit().Each(ctx, batch, "", func(e ledger.AuditEntry) error { return enc.Encode(e) })
	})
}
