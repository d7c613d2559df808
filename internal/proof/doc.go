// Package proof is the harness of payout, kept apart from the product: the
// chaos suite, the bench, the cluster tests, the test environment (ports,
// tools, Redis and nginx for tests, subprocesses, golden files), the log
// sink, the faulty Redis proxy, the web UI wired for tests, the documents'
// checks, and the commands that run them (internal/proof/cmd/chaos,
// internal/proof/cmd/bench).
//
// Nothing under internal/proof is linked into a binary that ships:
// TestProductLinksNoProof fails when cmd/payout, cmd/psp-sandbox or
// cmd/healthcheck depend on a package under it. What payout run --sandbox
// and payout sandbox need for the demo (the embedded Redis, the PSP
// simulator and its HTTP/2 stream resets) is product and lives outside.
package proof
