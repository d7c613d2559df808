package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestBoolArg(t *testing.T) {
	tests := []struct {
		args []string
		env  map[string]string
		want bool
	}{
		{nil, nil, false},
		{[]string{"--short"}, nil, true},
		{[]string{"-short"}, nil, true},
		{[]string{"--rows", "300", "--short"}, nil, true},
		{[]string{"--short=false"}, nil, false},
		{[]string{"--short=true"}, nil, true},
		{[]string{"--shorter"}, nil, false},
		{nil, map[string]string{"PAYOUT_CHAOS_SHORT": "true"}, true},
		{[]string{"--short=false"}, map[string]string{"PAYOUT_CHAOS_SHORT": "true"}, false},
		{[]string{"--", "--short"}, nil, false},
	}
	for _, tt := range tests {
		lookup := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
		if got := boolArg(tt.args, lookup, "short"); got != tt.want {
			t.Errorf("boolArg(%q, %v) = %t, want %t", tt.args, tt.env, got, tt.want)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--no-such-flag"}, nil, "no-such-flag"},
		{[]string{"extra"}, nil, "unexpected argument"},
		{[]string{"--rows", "0"}, nil, "rows must be"},
		{nil, map[string]string{"PAYOUT_CHAOS_ROWS": "many"}, "PAYOUT_CHAOS_ROWS"},
		{[]string{"--outage", "soon"}, nil, "outage"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		lookup := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
		code := run(context.Background(), tt.args, lookup, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("run(%q): exit %d, stderr %q; want 2 and %q", tt.args, code, stderr.String(), tt.want)
		}
	}
}

func TestHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, func(string) (string, bool) { return "", false }, &stdout, &stderr); code != 0 {
		t.Errorf("-h: exit %d", code)
	}
	for _, want := range []string{"--short", "-kill-every", "PAYOUT_CHAOS_"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("usage lacks %q:\n%s", want, stderr.String())
		}
	}
}
