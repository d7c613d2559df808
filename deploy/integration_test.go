//go:build integration

package deploy

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/proof/testenv/redistest"
)

// optionalTool returns the path of a tool, or skips the test, even in CI:
// systemd-analyze and docker compose are not on every CI machine, and the
// unit tests already check the same files statically.
func optionalTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not found: %v", name, err)
	}
	return p
}

// TestRedisServerAcceptsConfig starts the real redis-server with
// deploy/redis.conf and reads the settings back: the file is valid for the
// server, and the durability settings are in force.
func TestRedisServerAcceptsConfig(t *testing.T) {
	conf, err := filepath.Abs("redis.conf")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rdb := redistest.StartConfig(t, redistest.Config{Dir: dir, File: conf}).ClientT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for key, want := range map[string]string{
		"appendonly":                "yes",
		"appendfsync":               "always",
		"maxmemory-policy":          "noeviction",
		"aof-use-rdb-preamble":      "yes",
		"no-appendfsync-on-rewrite": "no",
		// Asynq task hashes stay listpacks (redis.conf, memory section).
		"hash-max-listpack-value": "512",
	} {
		got, err := rdb.ConfigGet(ctx, key).Result()
		if err != nil {
			t.Fatalf("CONFIG GET %s: %v", key, err)
		}
		if got[key] != want {
			t.Errorf("CONFIG GET %s = %q, want %q", key, got[key], want)
		}
	}
	// A write lands in the append-only file before it is acknowledged.
	if err := rdb.Set(ctx, "payout:deploy-test", "submitting", 0).Err(); err != nil {
		t.Fatal(err)
	}
	incr, _ := filepath.Glob(filepath.Join(dir, "appendonlydir", "*.incr.aof"))
	if len(incr) != 1 {
		t.Fatalf("want one incremental AOF in %s, found %q", dir, incr)
	}
	b, err := os.ReadFile(incr[0])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("payout:deploy-test")) {
		t.Fatalf("the acknowledged write is not in %s", incr[0])
	}
}

// TestSystemdAnalyzeVerify runs `systemd-analyze verify` on the units (with
// the payout binary replaced by a stub, since it is not installed here) and
// `systemd-analyze security --offline` to bound their exposure score.
// Optional: skipped, even in CI, when systemd-analyze is missing.
func TestSystemdAnalyzeVerify(t *testing.T) {
	bin := optionalTool(t, "systemd-analyze")
	dir := t.TempDir()
	stub := filepath.Join(dir, "payout")
	if err := os.WriteFile(stub, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	units, err := filepath.Glob(filepath.Join("systemd", "payout-*"))
	if err != nil || len(units) < 4 {
		t.Fatalf("units: %q, %v", units, err)
	}
	var paths []string
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.Base(u))
		if err := os.WriteFile(p, bytes.ReplaceAll(b, []byte("/usr/local/bin/payout"), []byte(stub)), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	verify := func(paths ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{"verify", "--man=no"}, paths...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	// systemd-analyze verify exits 0 on unknown keys and bad values and
	// only prints them: any output is a failure.
	if out, err := verify(paths...); err != nil || out != "" {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	// The check can fail: a misspelled key must produce output.
	bad := filepath.Join(dir, "payout-bad.service")
	if err := os.WriteFile(bad, []byte("[Service]\nExecStart="+stub+"\nProtectHomee=yes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _ := verify(bad); !strings.Contains(out, "ProtectHomee") {
		t.Fatalf("verify did not report a misspelled key; output: %q", out)
	}

	for _, p := range paths {
		if !strings.HasSuffix(p, ".service") {
			continue
		}
		// Exposure is reported 0.0-10.0; the threshold is in tenths.
		cmd := exec.Command(bin, "security", "--offline=true", "--threshold=25", "--no-pager", p)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if errors.As(err, &exit) && strings.Contains(string(out), "unrecognized option") {
			t.Skipf("this systemd-analyze has no offline security check: %s", out)
		}
		if err != nil {
			t.Errorf("%s: exposure above 2.5 or check failed: %v\n%s", filepath.Base(p), err, out)
		}
	}
}

// TestDockerComposeConfig validates docker-compose.yml against the real
// Compose schema with `docker compose config` (client only, no engine).
// Optional: skipped, even in CI, when neither `docker compose` nor
// docker-compose is installed.
func TestDockerComposeConfig(t *testing.T) {
	var compose []string
	if docker, err := exec.LookPath("docker"); err == nil && exec.Command(docker, "compose", "version").Run() == nil {
		compose = []string{docker, "compose"}
	} else if dc, err := exec.LookPath("docker-compose"); err == nil {
		compose = []string{dc}
	} else {
		t.Skip("neither `docker compose` nor docker-compose is installed")
	}
	// An empty env file, so a developer's deploy/.env does not leak in.
	empty := filepath.Join(t.TempDir(), "empty.env")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(env []string) (string, error) {
		args := append(compose[1:], "--env-file", empty, "-f", "docker-compose.yml", "config", "-q")
		cmd := exec.Command(compose[0], args...)
		var clean []string
		for _, kv := range os.Environ() {
			k, _, _ := strings.Cut(kv, "=")
			if !envExampleKeys(readFile(t, "env.example"))[k] {
				clean = append(clean, kv)
			}
		}
		cmd.Env = append(clean, env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	var env []string
	for k := range envExampleKeys(readFile(t, "env.example")) {
		env = append(env, k+"=placeholder")
	}
	if out, err := run(env); err != nil {
		t.Fatalf("%s config: %v\n%s", strings.Join(compose, " "), err, out)
	}
	// Without deploy/.env the stack must refuse to start, naming the value.
	out, err := run(nil)
	if err == nil || !strings.Contains(out, "REDIS_PASSWORD") {
		t.Fatalf("config without secrets: err=%v, want a failure naming REDIS_PASSWORD:\n%s", err, out)
	}
}
