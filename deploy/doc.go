// Package deploy holds no production code: it is the home of the deployment
// files of payout (crontab, systemd units, Dockerfile, docker-compose.yml,
// Kubernetes manifests, redis.conf) and of the tests that check them.
//
// The unit tests need only Go: they parse every file and assert the
// properties the operations of a payments ledger depend on (no overlapping
// loader runs, graceful worker shutdown longer than the PSP timeout, a Redis
// that fsyncs every write and never evicts, non-root containers, no secret
// value committed). Kubernetes manifests are decoded strictly into the real
// k8s.io/api types, so a misspelled field fails the build.
//
// deploy/ is a module of its own (github.com/acme/payout/deploy), so that
// k8s.io/* stays out of the product module; it uses the product's test
// environment (internal/proof/testenv) through a replace directive.
//
// Tests behind the build tag "integration" run the real tools when present:
// redis-server (required under CI=true), systemd-analyze and docker compose
// (optional everywhere: they are skipped when missing, even in CI).
package deploy
