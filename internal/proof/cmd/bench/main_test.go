package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown command", []string{"frobnicate"}, "unknown command"},
		{"unknown flag", []string{"--no-such-flag"}, "flag provided but not defined"},
		{"stray argument", []string{"--loader-rows", "5", "extra"}, "unexpected argument"},
		{"unknown measurement", []string{"--only", "loader,nonsense"}, `unknown measurement "nonsense"`},
		{"bare-enqueue without redis", []string{"bare-enqueue", "--rows", "5"}, "needs --redis"},
		{"bare-worker without psp", []string{"bare-worker", "--redis", "redis://127.0.0.1:1/0"}, "needs --redis, --psp-url"},
		{"watch without checks", []string{"watch", "--checks", "0"}, "watch needs --payouts, --checks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errs bytes.Buffer
			if code := run(context.Background(), tc.args, &out, &errs); code != 2 {
				t.Fatalf("exit %d, want 2 (stderr %q)", code, errs.String())
			}
			if !strings.Contains(errs.String(), tc.want) {
				t.Errorf("stderr %q lacks %q", errs.String(), tc.want)
			}
		})
	}
}

func TestHelpExitsZero(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, &out, &errs); code != 0 || !strings.Contains(errs.String(), "-loader-rows") {
		t.Fatalf("exit %d, stderr %q", code, errs.String())
	}
}
