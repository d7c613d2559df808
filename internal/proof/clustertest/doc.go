// Package clustertest proves that payout runs on a Redis Cluster and
// measures how it scales out. It runs the payout and psp-sandbox binaries as
// subprocesses against real redis-server processes (single nodes and
// 3-master clusters on loopback, from internal/proof/testenv/redistest) and reads
// their results; the tests carry the build tag integration.
//
//	go test -tags integration -run TestCluster ./internal/proof/clustertest/ -v
//	go test -tags integration -run TestScaleOut ./internal/proof/clustertest/ -v -scale
//
// TestClusterChaos loads 2,000 payouts into a 3-master cluster, runs two
// worker processes against the PSP simulator with faults on and checks the
// outcome as a chaos run does. TestScaleOut (opt-in with -scale, a few
// minutes) prints the throughput of 1, 2 and 4 worker processes on one Redis
// and shows that a shared --rate holds across processes.
//
// Under CI=true a missing redis-server or redis-cli fails the tests; elsewhere
// they are skipped.
package clustertest
