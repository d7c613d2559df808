package flagenv

import (
	"flag"
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
