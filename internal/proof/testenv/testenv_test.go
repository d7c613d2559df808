package testenv

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestPoll(t *testing.T) {
	n := 0
	err := Poll(context.Background(), 5*time.Second, time.Millisecond, func() (bool, error) { n++; return n == 3, nil })
	if err != nil || n != 3 {
		t.Errorf("got %v after %d calls", err, n)
	}
	err = Poll(context.Background(), 20*time.Millisecond, time.Millisecond, func() (bool, error) { return false, nil })
	if !errors.Is(err, ErrDeadline) {
		t.Errorf("never true: got %v", err)
	}
	boom := errors.New("boom")
	if err := Poll(context.Background(), time.Second, time.Millisecond, func() (bool, error) { return false, boom }); !errors.Is(err, boom) {
		t.Errorf("failing condition: got %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Poll(ctx, time.Minute, time.Millisecond, func() (bool, error) { return false, nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: got %v", err)
	}
}

func TestFreePortPlusGivesAPairThatListens(t *testing.T) {
	p, err := FreePortPlus(10000)
	if err != nil {
		t.Fatal(err)
	}
	for _, port := range []int{p, p + 10000} {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("port %d: %v", port, err)
		}
		_ = l.Close()
	}
}

func TestCleanEnvDropsPayoutSettings(t *testing.T) {
	t.Setenv("PAYOUT_REDIS_URL", "redis://elsewhere:6379/0")
	env := CleanEnv("PAYOUT_PSP_TOKEN=x")
	for _, kv := range env {
		if strings.HasPrefix(kv, "PAYOUT_REDIS_URL=") {
			t.Fatal("PAYOUT_REDIS_URL leaked into the subprocess environment")
		}
	}
	if env[len(env)-1] != "PAYOUT_PSP_TOKEN=x" {
		t.Fatalf("extra not appended: %v", env[len(env)-1])
	}
}
