package flagenv

import (
	"flag"
	"fmt"
	"strings"
	"testing"
)

func TestApply(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	url := fs.String("psp-url", "default", "")
	n := fs.Int("concurrency", 1, "")
	rate := fs.Int("rate", 0, "")
	if err := fs.Parse([]string{"--rate", "9"}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"P_PSP_URL": "http://env", "P_CONCURRENCY": "7", "P_RATE": "5"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if err := Apply(fs, func(f string) string { return Name("P_", f) }, lookup); err != nil {
		t.Fatal(err)
	}
	if *url != "http://env" || *n != 7 || *rate != 9 {
		t.Fatalf("url %q concurrency %d rate %d: want env for unset flags, the flag where given", *url, *n, *rate)
	}
	env["P_CONCURRENCY"] = "secret-looking-value"
	fs2 := flag.NewFlagSet("x", flag.ContinueOnError)
	fs2.Int("concurrency", 1, "")
	_ = fs2.Parse(nil)
	err := Apply(fs2, func(f string) string { return Name("P_", f) }, lookup)
	if err == nil || !strings.Contains(err.Error(), "P_CONCURRENCY") || strings.Contains(err.Error(), "secret-looking") {
		t.Fatalf("error %v: want the variable named, not its value", err)
	}
}

func TestApplyRuleDeprecated(t *testing.T) {
	rule := Rule{
		Name: func(f string) string { return Name("P_", f) },
		Old: func(f string) string {
			if f == "redis" {
				return "P_REDIS_URL"
			}
			return ""
		},
	}
	for _, tc := range []struct {
		name   string
		args   []string
		env    map[string]string
		want   string
		notice string
	}{
		{"new name", nil, map[string]string{"P_REDIS": "new"}, "new", ""},
		{"old name still read", nil, map[string]string{"P_REDIS_URL": "old"}, "old", "P_REDIS_URL is deprecated: rename it P_REDIS (read this time)"},
		{"both: the new one wins", nil, map[string]string{"P_REDIS_URL": "old", "P_REDIS": "new"}, "new",
			"P_REDIS_URL and P_REDIS are both set: P_REDIS is used; P_REDIS_URL is deprecated, remove it"},
		{"the flag wins over both", []string{"--redis", "flag"}, map[string]string{"P_REDIS_URL": "old"}, "flag",
			"P_REDIS_URL is deprecated: rename it P_REDIS (--redis on the command line wins over both)"},
		{"nothing set", nil, nil, "default", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			v := fs.String("redis", "default", "")
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			notices, err := ApplyRule(fs, rule, func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if err != nil {
				t.Fatal(err)
			}
			if *v != tc.want {
				t.Errorf("--redis %q, want %q", *v, tc.want)
			}
			got := strings.Join(notices, "\n")
			if got != tc.notice {
				t.Errorf("notices %q, want %q", got, tc.notice)
			}
			for _, val := range tc.env {
				if strings.Contains(got, val) {
					t.Errorf("a notice shows a value: %q", got)
				}
			}
		})
	}
}

func TestUnknown(t *testing.T) {
	known := map[string]bool{"P_REDIS": true, "P_PSP_TOKEN": true, "P_CONCURRENCY": true}
	env := []string{"P_REDIS=x", "P_REDIS_ULR=redis://secret@h", "P_PSP_TOKN=s3cret", "P_TEST_X=1", "HOME=/root", "P_SOMETHING_ELSE_ENTIRELY=1", "P_REDIS_ULR=again"}
	got := Unknown(env, "P_", known, "P_TEST_")
	want := []Stray{{"P_PSP_TOKN", "P_PSP_TOKEN"}, {"P_REDIS_ULR", "P_REDIS"}, {"P_SOMETHING_ELSE_ENTIRELY", ""}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Unknown = %v, want %v", got, want)
	}
}

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"abc", "", 3}, {"kitten", "sitting", 3}, {"REDIS_URL", "REDIS", 4}, {"TOKN", "TOKEN", 1}} {
		if got := distance(tc.a, tc.b); got != tc.d {
			t.Errorf("distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.d)
		}
	}
}
