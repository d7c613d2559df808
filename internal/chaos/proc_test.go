package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acme/payout/internal/redisdump"
	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// The test binary doubles as the subprocess of the process tests.
const helperEnv = "PAYOUT_CHAOS_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "exit3":
		fmt.Println("out")
		fmt.Fprintln(os.Stderr, "err")
		os.Exit(3)
	}
	os.Exit(9)
}

func helper(t *testing.T, mode string) (string, []string) {
	t.Helper()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return bin, append(os.Environ(), helperEnv+"="+mode)
}

func TestRunOnce(t *testing.T) {
	bin, env := helper(t, "exit3")
	log := filepath.Join(t.TempDir(), "once.log")
	code, out, err := runOnce(context.Background(), bin, nil, env, log, true)
	if err != nil || code != 3 || string(out) != "out\n" {
		t.Errorf("captured: code %d out %q err %v", code, out, err)
	}
	code, _, err = runOnce(context.Background(), bin, nil, env, log, false)
	if err != nil || code != 3 {
		t.Errorf("logged: code %d err %v", code, err)
	}
	b, _ := os.ReadFile(log)
	if string(b) != "err\nout\nerr\n" {
		t.Errorf("log %q", b)
	}
	if _, _, err := runOnce(context.Background(), filepath.Join(t.TempDir(), "missing"), nil, env, log, false); err == nil {
		t.Error("a missing binary gave no error")
	}
}

func TestDumpRedis(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	rdb.Set(ctx, "s", "string-value", 0)
	rdb.HSet(ctx, "h", "field", "hash-value")
	rdb.RPush(ctx, "l", "list-value")
	rdb.SAdd(ctx, "set", "set-value")
	rdb.ZAdd(ctx, "z", redis.Z{Score: 1, Member: "zset-value"})
	dump, err := redisdump.Text(ctx, rdb)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"h (hash) map[field:hash-value]", "l (list) [list-value]", "s (string) string-value", "set (set) [set-value]", "zset-value"} {
		if !strings.Contains(dump, want) {
			t.Errorf("dump lacks %q:\n%s", want, dump)
		}
	}
	if strings.Index(dump, "h (hash)") > strings.Index(dump, "s (string)") {
		t.Errorf("keys not sorted:\n%s", dump)
	}
}
