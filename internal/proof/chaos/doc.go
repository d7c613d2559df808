// Package chaos is the proof-of-safety suite of payout: it runs the real
// binaries against a real Redis and the PSP sandbox while breaking things,
// then checks that no payout was created twice or lost, that every created
// payout ended paid or failed exactly as the simulator decided, that the
// books reconcile to the cent and that no card number or secret leaked.
//
// One run ([Run], `make chaos`, `make chaos-short`):
//
//  1. builds cmd/payout (internal/proof/cmd/payout-skipcheck instead when
//     [Config.Broken], internal/proof/cmd/payout-replay when
//     [Config.BrokenReplay]), internal/proof/chaos/payoutclock (the same
//     command line with its task clock injected) when
//     [Config.ClockOffset] is set, and cmd/psp-sandbox into the work
//     directory;
//  2. starts redis-server with AOF (appendfsync always) on a free loopback
//     port, a redisfault proxy in front of it for the workers that loses a
//     share of their EVAL/EVALSHA replies after Redis ran the script
//     ([Config.RedisReplyDrop]), the sandbox with the fault knobs of
//     [Config], a token gateway in front of it (see below) speaking HTTP/2
//     over TLS to the workers, [Config.Workers] `payout worker` processes
//     (data key from `payout keygen`, PSP token in a file, a short
//     reconciler interval, --track-outcome with short
//     [Config.OutcomeIntervals], a callback listener of its own; the first
//     one, and whoever replaces it, the payoutclock binary with its
//     task clock [Config.ClockOffset] off), `payout ui --read-only` with
//     basic auth and a read-write `payout ui` for the operator's deletes;
//  3. drops the generated payout files ([Generate]) into the spool inbox
//     one by one and runs `payout load --spool` every [Config.LoaderEvery]
//     like cron would (with [Config.APISubmit], the last file goes
//     through `payout api` instead, one Idempotency-Key, behind a
//     [FlakyProxy], and must make exactly one batch), under approval ([Config.Approval]: --approval
//     required, one file under --auto-approve-below), and approves each
//     batch awaiting approval [Config.ApproveAfter] after it appears
//     (`payout approve --four-eyes`), as a person would mid-run, after
//     cancelling [Config.Cancels] payouts of one of them (`payout cancel`);
//  4. meanwhile SIGKILLs a random worker every [Config.KillEvery] (and
//     starts another), deletes or archives random pending, scheduled and
//     retry tasks through the web UI's API (asynqmon) every
//     [Config.TaskDeleteEvery], removes the lease entries of random active
//     tasks every [Config.OrphanEvery] (hibiken/asynq#1051: orphans only
//     the reconciler can restore), SIGKILLs the first loader run that is
//     in the middle of a file ([Config.InterruptLoads]: the batch must pay
//     nothing until a later run completes it), kills Redis with SIGKILL once and starts it
//     again on the same AOF, rotates the PSP token once, and every
//     [Config.ForgeEvery] sends a worker a forged callback (see below);
//  5. when every payout is final, outcomes included (or the deadline
//     passed), writes the last result files, stops the workers and checks
//     the books ([Verify]) against the sandbox's stored orders and their
//     truth (finalStatus, finalReason) and `payout report --format json`:
//     a cancelled payout must have no order, and the count `payout cancel`
//     reported; every batch's outbox NAME.audit.jsonl must give each
//     payout an unbroken chain of transitions ending in its ledger state;
//  6. scans every file the run wrote (logs of every process, outbox,
//     reports, web UI pages fetched mid-run and at the end, a dump of every
//     Redis key and the AOF itself) for every full card number and every
//     secret ([Scanner]), after proving on the payout files that the
//     scanner finds what it looks for;
//  7. with [Config.Events], waits until every payout event is delivered
//     to the suite's webhook receiver ([EventReceiver]: every delivery
//     verified by the node Standard Webhooks verifier, a share answered
//     500, dropped or late) and checks every payout's events 1..n, the
//     last its end state ([CheckEvents]), and that the verifier refuses a
//     replayed and a re-signed delivery;
//  8. prints one line of [Figures] and fails when duplicates, lost payouts,
//     outcome mismatches, leaks, mismatches, audit mismatches, missing or
//     mismatched events or deliveries the verifier refused are not zero.
//
// # Outcomes and callbacks
//
// The sandbox settles every order it stores [Config.SettleAfter] after its
// creation: paid, or failed with a reason for a seeded share
// [Config.PFail]. The workers follow each created payout to that outcome by
// status queries, and the sandbox POSTs every status change (Processing,
// then final) as a callback, a share of them twice, each delayed at random
// (so they arrive reordered). Workers are killed and replaced all the time,
// so the sandbox is given one stable address: a [Forwarder] run by the
// suite, which passes each callback unchanged to the listener of a live
// worker (503 when none answers, and the sandbox retries). The suite also
// forges callbacks and sends them straight to a live worker: a wrong,
// truncated or missing secret (each must be refused 401; one that is not
// counts as a mismatch), an unknown order, and a real payout with a status
// it may not have (both answered 200, and changing nothing). A callback is
// only a hint to query now; the outcome of every created payout must be its
// order's finalStatus at the sandbox (and a failure keep its reason), or
// it counts in outcome_mismatches. The broken runs go without the
// lifecycle: their orders stay Created and created is final.
//
// # Token rotation
//
// The sandbox accepts one fixed token and has no admin call to change it,
// and restarting it would lose its order store. So the workers talk to a
// [Gateway] run by the suite: it accepts the tokens the suite says (401
// otherwise, like the PSP) and forwards everything else unchanged to the
// sandbox with the sandbox's own token. A rotation accepts the old and the
// new token, writes the new one into the workers' token file, and revokes
// the old one once no request has carried it for a second.
//
// # HTTP/2 stream resets
//
// The gateway also does the HTTP/2 faults ([Gateway.StartH2]): it serves
// HTTP/2 over TLS with a certificate from a CA made for the run, and after
// the sandbox stored a create and answered it 200 it resets the worker's
// stream instead of answering, with probability [Config.H2Reset], with
// REFUSED_STREAM or PROTOCOL_ERROR: the resets after which Go's HTTP/2
// client replays a request it can rewind. The safe worker never can (a
// create has no GetBody) and resolves the payout by a status check; the
// broken client of internal/proof/cmd/payout-replay replays, and the run
// must show the second orders as duplicates (`make chaos BROKEN=2`).
//
// # Work directory
//
//	bin/        the binaries built       secrets/   data key, PSP token
//	staging/    files not yet dropped    spool/     inbox, processing, done, failed, outbox
//	logs/       stdout+stderr of every process
//	reports/    payout report output     ui/        web UI pages
//	redis/      the AOF                  redis-contents.txt, findings.txt
//
// The callback secret is one of the secrets the leak scan looks for.
//
// It is removed after a passing run unless [Config.KeepWork], and kept (its
// path printed) after a failing one.
package chaos
