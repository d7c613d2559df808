// Package results turns what the ledger holds about a batch into what people
// get back: the result and summary files (written through package report),
// the retry file of its failed payouts, its audit trail, the archive that
// moves a finished batch out of Redis into such files, and the phase a
// batch is said to be in.
//
// # Why two packages
//
// Package report is the pure half: it formats rows into files (CSV, XLSX,
// JSON, the summary, the error listing of a refused file) and reads no
// Redis, no ledger record, no queue; it takes rows from an iterator and is
// tested with slices. This package is the bridge from the ledger: every
// function that reads a batch, its payouts, its audit trail or its archive
// and hands rows to report lives here, and nowhere else. The archive
// writer is here because it is the same bridge run once more before the
// keys are deleted: it reads the batch, writes the archive, reads the
// archive back into report's result file, and only then deletes (an
// earlier layout split the bridge and the archive into two packages, each
// converting ledger payouts to rows and choosing the format on its own).
//
// # Result files
//
// [Write], [WriteFiles] and [WriteSummary] read a batch (metadata, then
// its payouts in line order, streamed) and write it through report; [Rows]
// and [Row] convert the ledger's payouts to report rows. [WriteRetry]
// writes the failed payouts as a payout file to load again (retry.go).
// [WriteAudit] writes the audit trail, card numbers masked.
//
// # Phase
//
// [PhaseOf] names a batch's phase for people (payout status, its --json,
// the web UI) from the ledger's phase and counters, in one place.
//
// # Archive
//
// [Archive] moves finished batches out of Redis into files, so that
// Redis holds only the batches still in flight (payout archive, and the
// same step at the end of every spool run).
//
// A batch is archived when it is final ([Archivable]: no payout with an
// automatic step due (ledger.Counts.Open() == 0), none in needs_review,
// and phase loaded or discarded) and its last change is older than
// ArchiveOptions.OlderThan. Its last change, on Redis's clock, is the
// latest of its load time, its approval decision, the last entry of its
// audit trail and the 'updated' time of each of its payouts (the audit
// trail gives a cheap first answer; the payouts, read anyway to write the
// archive, confirm it).
//
// For a batch FILE with id B the archive folder receives, each written to a
// temporary file, fsynced and renamed into place, then read back:
//
//	FILE.B.archive.jsonl.gz  a header line {"batch": meta, "counts": counters},
//	                         one line {"payout": fields} per payout with every
//	                         ledger field but the sealed card number (the
//	                         destination is the masked form), and a last line
//	                         {"end": {"payouts": N}}
//	FILE.B.result.csv        the result file, as payout report writes it
//	FILE.B.audit.jsonl       the audit trail, when the batch has one
//
// Then, in this order (see ledger/archive.go for the keys):
//
//  1. the files above are written and fsynced, the folder too;
//  2. the archive is read back: its payouts per state and their amounts
//     must equal the batch's counters, to the unit;
//  3. the summary hash PREFIX:{B}:archived is written and the batch's
//     externalId claims get an expiry of ArchiveOptions.IDWindow;
//  4. the payout hashes are deleted in chunks, each only if unchanged since
//     step 1 (else the run stops: the next one rewrites the archive);
//  5. lines, counts, the audit stream, loadlock and meta go, meta last.
//
// A run killed anywhere leaves the keys, or the files plus the keys (and
// perhaps the summary and part of the payouts): never neither. A batch with
// both a summary and meta is finished by the next run, which rebuilds the
// archive from the payouts still in Redis and, for those already deleted,
// from the archive it wrote before.
//
// The batch's Asynq tasks are not touched: they are all completed (the
// batch is final) and expire by Asynq's retention.
//
// [WriteArchived] writes the result file of an archived batch from its
// archive file alone.
package results
