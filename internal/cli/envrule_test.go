package cli

import (
	"bytes"
	"context"
	"flag"
	"strings"
	"testing"
)

// ruleName is the variable rule stated in `payout help`, written out here
// independently of envName.
func ruleName(command, flagName string) string {
	prefix := "PAYOUT_"
	if command == "sandbox" {
		prefix = "PAYOUT_SANDBOX_"
	}
	return prefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// TestEveryFlagFollowsTheRule: every flag of every command (its real
// FlagSet, so a new flag is covered too) is read from PAYOUT_<FLAG>
// (PAYOUT_SANDBOX_<FLAG> for payout sandbox), and from no other name: the
// variable of each flag is set and parse either sets the flag from it or
// names exactly that variable in its error.
func TestEveryFlagFollowsTheRule(t *testing.T) {
	for _, c := range commands() {
		t.Run(c.name, func(t *testing.T) {
			fs := captureFlags(c, &env{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, getenv: func(string) string { return "" }})
			if fs == nil {
				t.Fatalf("payout %s builds no FlagSet", c.name)
			}
			vars := map[string]string{}
			n := 0
			fs.VisitAll(func(f *flag.Flag) {
				v := f.DefValue
				if v == "" {
					v = "x"
				}
				vars[ruleName(c.name, f.Name)] = v
				n++
			})
			var errb bytes.Buffer
			e := &env{stdout: &bytes.Buffer{}, stderr: &errb, getenv: func(k string) string { return vars[k] }}
			err := parse(e, fs, nil)
			msg := ""
			if err != nil {
				msg = err.Error()
			}
			set := map[string]bool{}
			fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
			fs.VisitAll(func(f *flag.Flag) {
				name := ruleName(c.name, f.Name)
				if got := envName(c.name, f.Name); got != name {
					t.Errorf("--%s: variable %s, want %s", f.Name, got, name)
				}
				if !set[f.Name] && !strings.Contains(msg, name+":") {
					t.Errorf("--%s was not read from %s", f.Name, name)
				}
			})
			if strings.Contains(errb.String(), "deprecated") {
				t.Errorf("the rule's names gave a deprecation warning:\n%s", errb.String())
			}
			if n == 0 && c.name != "keygen" {
				t.Errorf("payout %s has no flags", c.name)
			}
		})
	}
}

// TestDeprecatedVariables: the variables some flags had before the rule
// are still read, with a warning naming the new one; the new one wins when
// both are set, and the warning says so; no value is printed.
func TestDeprecatedVariables(t *testing.T) {
	for _, tc := range []struct {
		command, flag, old, new string
	}{
		{"load", "redis", "PAYOUT_REDIS_URL", "PAYOUT_REDIS"},
		{"worker", "redis", "PAYOUT_REDIS_URL", "PAYOUT_REDIS"},
		{"ui", "addr", "PAYOUT_UI_ADDR", "PAYOUT_ADDR"},
		{"ui", "users", "PAYOUT_UI_USERS_FILE", "PAYOUT_USERS"},
		{"approve", "by", "PAYOUT_OPERATOR", "PAYOUT_BY"},
		{"resolve", "by", "PAYOUT_OPERATOR", "PAYOUT_BY"},
	} {
		t.Run(tc.command+"/"+tc.flag, func(t *testing.T) {
			c := commandNamed(t, tc.command)
			for _, both := range []bool{false, true} {
				vars := map[string]string{tc.old: "old-value-1"}
				want, say := "old-value-1", tc.old+" is deprecated: rename it "+tc.new
				if both {
					vars[tc.new] = "new-value-2"
					want, say = "new-value-2", tc.old+" and "+tc.new+" are both set: "+tc.new+" is used"
				}
				var errb bytes.Buffer
				e := &env{stdout: &bytes.Buffer{}, stderr: &errb, getenv: func(k string) string { return vars[k] }}
				fs := captureFlags(c, &env{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, getenv: func(string) string { return "" }})
				if err := parse(e, fs, nil); err != nil {
					t.Fatal(err)
				}
				if got := fs.Lookup(tc.flag).Value.String(); got != want {
					t.Errorf("both %v: --%s %q, want %q", both, tc.flag, got, want)
				}
				if !strings.Contains(errb.String(), say) || strings.Contains(errb.String(), "value-") {
					t.Errorf("both %v: warning %q, want %q and no value", both, errb.String(), say)
				}
			}
		})
	}
}

func commandNamed(t *testing.T, name string) command {
	t.Helper()
	for _, c := range commands() {
		if c.name == name {
			return c
		}
	}
	t.Fatalf("no command %s", name)
	return command{}
}

// TestUnknownVariables: a PAYOUT_* variable nothing reads is warned about
// with the closest known name (secrets' variables are known names too);
// its value is never printed; known, deprecated and test-harness variables
// give no such warning.
func TestUnknownVariables(t *testing.T) {
	environ := []string{
		"PAYOUT_REDIS_ULR=redis://:hunter2@10.0.0.9:6477/0", // typo of PAYOUT_REDIS
		"PAYOUT_PSP_TOKN=tok-hunter2",                       // typo of a secret's variable
		"PAYOUT_CONCURENCY=4",                               // typo of a worker flag's
		"PAYOUT_WHATEVER_ELSE_ENTIRELY=1",
		"PAYOUT_DATA_KEY=hunter2-key", "PAYOUT_UI_PASSWORD=hunter2", "PAYOUT_REDIS_URL=redis://127.0.0.1:1/0",
		"PAYOUT_SANDBOX_P_FAIL=0.1", "PAYOUT_TEST_REDIS_URL=x", "PAYOUT_RATE=3", "HOME=/nowhere",
	}
	var out, errb bytes.Buffer
	MainEnviron(context.Background(), []string{"status"}, nil, &out, &errb, environ)
	got := errb.String()
	for _, want := range []string{
		"PAYOUT_REDIS_ULR is not a payout variable: ignored; did you mean PAYOUT_REDIS?",
		"PAYOUT_PSP_TOKN is not a payout variable: ignored; did you mean PAYOUT_PSP_TOKEN?",
		"PAYOUT_CONCURENCY is not a payout variable: ignored; did you mean PAYOUT_CONCURRENCY?",
		"PAYOUT_WHATEVER_ELSE_ENTIRELY is not a payout variable: ignored\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("stderr lacks %q:\n%s", want, got)
		}
	}
	for _, quiet := range []string{"PAYOUT_DATA_KEY is", "PAYOUT_UI_PASSWORD is", "PAYOUT_REDIS_URL is not", "PAYOUT_SANDBOX_P_FAIL", "PAYOUT_TEST_", "PAYOUT_RATE"} {
		if strings.Contains(got, quiet) {
			t.Errorf("a known variable was warned about (%s):\n%s", quiet, got)
		}
	}
	if strings.Contains(got, "hunter2") {
		t.Errorf("a value was printed:\n%s", got)
	}
}

// TestRedisLine: a command that opens Redis names it first: host, port and
// database (sentinel: addresses and master), never a user or password.
func TestRedisLine(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"redis://:hunter2@127.0.0.1:1/4", "payout status: Redis 127.0.0.1:1, database 4\n"},
		{"redis://admin:hunter2@127.0.0.1:1", "payout status: Redis 127.0.0.1:1, database 0\n"},
		{"redis-sentinel://:hunter2@127.0.0.1:1,127.0.0.1:2/pay?db=2", `payout status: Redis sentinel 127.0.0.1:1,127.0.0.1:2, master "pay", database 2` + "\n"},
	} {
		var out, errb bytes.Buffer
		code := Main(context.Background(), []string{"status"}, nil, &out, &errb,
			func(k string) string { return map[string]string{"PAYOUT_REDIS": tc.url}[k] })
		got := errb.String()
		if code != ExitInfra || !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d starting %q", tc.url, code, got, ExitInfra, tc.want)
		}
		if strings.Contains(got, "hunter2") || strings.Contains(strings.SplitN(got, "\n", 2)[0], "admin") {
			t.Errorf("%s: a secret (or, in the Redis line, the user) was printed: %q", tc.url, got)
		}
	}
}
