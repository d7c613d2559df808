package deploy

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// unitFile is a parsed systemd unit: section -> key -> values in order
// (a key may repeat, e.g. LoadCredential=).
type unitFile map[string]map[string][]string

// parseUnit reads the INI dialect of systemd: [Section] headers, Key=Value
// lines, # and ; comments, trailing-backslash continuations.
func parseUnit(text string) (unitFile, error) {
	u := unitFile{}
	section := ""
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		n := i + 1
		line := strings.TrimSpace(lines[i])
		for strings.HasSuffix(line, `\`) && i+1 < len(lines) {
			i++
			line = strings.TrimSpace(strings.TrimSuffix(line, `\`)) + " " + strings.TrimSpace(lines[i])
		}
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[':
			if !strings.HasSuffix(line, "]") {
				return nil, fmt.Errorf("line %d: bad section header %q", n, line)
			}
			section = line[1 : len(line)-1]
			if _, dup := u[section]; dup {
				return nil, fmt.Errorf("line %d: section [%s] repeated", n, section)
			}
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				return nil, fmt.Errorf("line %d: %q is not Key=Value", n, line)
			}
			if section == "" {
				return nil, fmt.Errorf("line %d: key %q outside any section", n, k)
			}
			k = strings.TrimSpace(k)
			u[section][k] = append(u[section][k], strings.TrimSpace(v))
		}
	}
	return u, nil
}

// last is the effective value of a single-valued key ("" and false when unset).
func (u unitFile) last(section, key string) (string, bool) {
	vs := u[section][key]
	if len(vs) == 0 {
		return "", false
	}
	return vs[len(vs)-1], true
}

var spanPart = regexp.MustCompile(`\s*(\d+)\s*([a-z]*)\s*`)

// spanUnits are the time units of systemd.time(7) that units here may use.
var spanUnits = map[string]time.Duration{
	"": time.Second, "us": time.Microsecond, "ms": time.Millisecond,
	"s": time.Second, "sec": time.Second, "second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
}

// parseTimeSpan reads a systemd time span such as "90", "90s", "1min 30s".
func parseTimeSpan(s string) (time.Duration, error) {
	var d time.Duration
	rest := s
	for rest != "" {
		m := spanPart.FindStringSubmatchIndex(rest)
		if m == nil || m[0] != 0 {
			return 0, fmt.Errorf("bad time span %q", s)
		}
		n, err := strconv.Atoi(rest[m[2]:m[3]])
		if err != nil {
			return 0, fmt.Errorf("bad time span %q: %w", s, err)
		}
		unit, ok := spanUnits[rest[m[4]:m[5]]]
		if !ok {
			return 0, fmt.Errorf("bad time span %q: unknown unit %q", s, rest[m[4]:m[5]])
		}
		d += time.Duration(n) * unit
		rest = rest[m[1]:]
	}
	if strings.TrimSpace(s) == "" {
		return 0, fmt.Errorf("empty time span")
	}
	return d, nil
}

func TestParseTimeSpan(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"90", 90 * time.Second, true},
		{"90s", 90 * time.Second, true},
		{"1min 30s", 90 * time.Second, true},
		{"30min", 30 * time.Minute, true},
		{"2h", 2 * time.Hour, true},
		{"500ms", 500 * time.Millisecond, true},
		{"", 0, false},
		{"soon", 0, false},
		{"10 parsecs", 0, false},
		{"1min30s", 90 * time.Second, true},
		{"5s x", 0, false},
	} {
		got, err := parseTimeSpan(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseTimeSpan(%q) = %v, %v; want %v, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestParseUnit(t *testing.T) {
	u, err := parseUnit("# c\n[Unit]\nDescription=x\n\n[Service]\nExecStart=/bin/a \\\n  --b\nEnvironment=A=1\nEnvironment=B=2\nCapabilityBoundingSet=\n")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := u.last("Service", "ExecStart"); got != "/bin/a --b" {
		t.Errorf("continuation: got %q", got)
	}
	if got := u["Service"]["Environment"]; len(got) != 2 || got[1] != "B=2" {
		t.Errorf("repeated key: got %q", got)
	}
	if v, ok := u.last("Service", "CapabilityBoundingSet"); !ok || v != "" {
		t.Errorf("empty value: got %q, %v", v, ok)
	}
	for _, bad := range []string{"Key=1\n", "[Unit\n", "[Unit]\nnot a pair\n", "[A]\n[A]\n"} {
		if _, err := parseUnit(bad); err == nil {
			t.Errorf("parseUnit(%q): no error", bad)
		}
	}
}

// pspTimeout is the worker's --psp-timeout default; a stop timeout must
// outlast a request in flight.
const pspTimeout = 30 * time.Second

// serviceHardening lists settings every payout service must have.
var serviceHardening = map[string]string{
	"DynamicUser":             "yes",
	"NoNewPrivileges":         "yes",
	"ProtectSystem":           "strict",
	"ProtectHome":             "yes",
	"PrivateTmp":              "yes",
	"CapabilityBoundingSet":   "",
	"RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
	"EnvironmentFile":         "/etc/payout/payout.env",
	"KillSignal":              "SIGTERM",
}

var credentialRef = regexp.MustCompile(`%d/([A-Za-z0-9_.-]+)`)

// checkService checks one .service file; kind is "load", "worker" or "ui".
func checkService(text, kind string) []error {
	u, err := parseUnit(text)
	if err != nil {
		return []error{err}
	}
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if _, ok := u["Unit"]; !ok {
		fail("no [Unit] section")
	}
	if _, ok := u["Service"]; !ok {
		return append(errs, fmt.Errorf("no [Service] section"))
	}
	for k, want := range serviceHardening {
		if got, ok := u.last("Service", k); !ok || got != want {
			fail("%s=%q, want %q", k, got, want)
		}
	}
	if !contains(u["Service"]["SystemCallFilter"], "@system-service") {
		fail("SystemCallFilter lacks @system-service")
	}
	if _, ok := u.last("Service", "MemoryMax"); !ok {
		fail("MemoryMax unset")
	}
	exec, _ := u.last("Service", "ExecStart")
	if !strings.HasPrefix(exec, "/") {
		fail("ExecStart %q: want an absolute path", exec)
	}
	creds := map[string]bool{}
	for _, lc := range u["Service"]["LoadCredential"] {
		name, path, _ := strings.Cut(lc, ":")
		if !strings.HasPrefix(path, "/etc/payout/") {
			fail("LoadCredential=%s: want a file under /etc/payout/", lc)
		}
		creds[name] = true
	}
	for _, m := range credentialRef.FindAllStringSubmatch(exec, -1) {
		if !creds[m[1]] {
			fail("ExecStart uses %%d/%s but no LoadCredential=%s:... hands it over", m[1], m[1])
		}
	}
	rw := u["Service"]["ReadWritePaths"]
	stop, hasStop := u.last("Service", "TimeoutStopSec")
	switch kind {
	case "load":
		if got, _ := u.last("Service", "Type"); got != "oneshot" {
			fail("Type=%q, want oneshot", got)
		}
		if !contains(rw, "/var/spool/payout") {
			fail("ReadWritePaths lacks the spool /var/spool/payout")
		}
		if !strings.Contains(exec, "payout load --spool /var/spool/payout") {
			fail("ExecStart %q does not run the spool loader", exec)
		}
	case "worker", "ui":
		if len(rw) > 0 {
			fail("ReadWritePaths=%q: only the loader writes to disk", rw)
		}
		if got, _ := u.last("Service", "Restart"); got != "on-failure" {
			fail("Restart=%q, want on-failure", got)
		}
		if !strings.Contains(exec, "payout "+kind) {
			fail("ExecStart %q does not run payout %s", exec, kind)
		}
		if wb := u["Install"]["WantedBy"]; !contains(wb, "multi-user.target") {
			fail("[Install] WantedBy=%q, want multi-user.target", wb)
		}
	}
	if kind == "worker" {
		if !strings.Contains(exec, "--psp-token-file=%d/psp-token") {
			fail("ExecStart %q: want the PSP token as a credential (--psp-token-file=%%d/psp-token)", exec)
		}
		if !hasStop {
			fail("TimeoutStopSec unset (the 90 s default is not a decision)")
		} else if d, err := parseTimeSpan(stop); err != nil {
			fail("TimeoutStopSec: %v", err)
		} else if d < 2*pspTimeout {
			fail("TimeoutStopSec=%s, want at least %v (twice the PSP timeout) for a graceful stop", stop, 2*pspTimeout)
		}
	}
	return errs
}

func contains(list []string, s string) bool {
	for _, v := range list {
		for _, f := range strings.Fields(v) {
			if f == s {
				return true
			}
		}
	}
	return false
}

// checkTimer checks payout-load.timer.
func checkTimer(text string) []error {
	u, err := parseUnit(text)
	if err != nil {
		return []error{err}
	}
	var errs []error
	for k, want := range map[string]string{"OnCalendar": "minutely", "Persistent": "false"} {
		if got, _ := u.last("Timer", k); got != want {
			errs = append(errs, fmt.Errorf("[Timer] %s=%q, want %q", k, got, want))
		}
	}
	if got, ok := u.last("Timer", "Unit"); ok && got != "payout-load.service" {
		errs = append(errs, fmt.Errorf("[Timer] Unit=%q, want payout-load.service", got))
	}
	if !contains(u["Install"]["WantedBy"], "timers.target") {
		errs = append(errs, fmt.Errorf("[Install] WantedBy lacks timers.target"))
	}
	return errs
}

func TestSystemdUnits(t *testing.T) {
	for _, kind := range []string{"load", "worker", "ui"} {
		t.Run(kind, func(t *testing.T) {
			requireClean(t, "payout-"+kind+".service", checkService(readFile(t, "systemd/payout-"+kind+".service"), kind))
		})
	}
	t.Run("timer", func(t *testing.T) {
		requireClean(t, "payout-load.timer", checkTimer(readFile(t, "systemd/payout-load.timer")))
	})
}

func TestSystemdChecksCatchBreakage(t *testing.T) {
	worker := readFile(t, "systemd/payout-worker.service")
	requireCaught(t, "worker/", worker, func(s string) []error { return checkService(s, "worker") }, []mutation{
		{"short stop timeout", "TimeoutStopSec=90s", "TimeoutStopSec=20s", "graceful stop"},
		{"no stop timeout", "TimeoutStopSec=90s\n", "", "TimeoutStopSec unset"},
		{"root", "DynamicUser=yes", "DynamicUser=no", "DynamicUser"},
		{"capabilities kept", "CapabilityBoundingSet=\n", "CapabilityBoundingSet=CAP_NET_ADMIN\n", "CapabilityBoundingSet"},
		{"no syscall filter", "SystemCallFilter=@system-service\n", "", "@system-service"},
		{"writes to disk", "ProtectSystem=strict", "ProtectSystem=strict\nReadWritePaths=/var/lib", "only the loader"},
		{"missing credential", "LoadCredential=psp-token:/etc/payout/psp-token\n", "", "no LoadCredential=psp-token"},
		{"token in argv", "--psp-token-file=%d/psp-token", "", "as a credential"},
		{"restart always", "Restart=on-failure", "Restart=always", "Restart"},
		{"no env file", "EnvironmentFile=/etc/payout/payout.env", "", "EnvironmentFile"},
		{"garbage line", "[Service]", "[Service]\nthis is not a pair", "not Key=Value"},
	})
	load := readFile(t, "systemd/payout-load.service")
	requireCaught(t, "load/", load, func(s string) []error { return checkService(s, "load") }, []mutation{
		{"not oneshot", "Type=oneshot", "Type=simple", "oneshot"},
		{"spool read-only", "ReadWritePaths=/var/spool/payout", "", "ReadWritePaths lacks"},
	})
	timer := readFile(t, "systemd/payout-load.timer")
	requireCaught(t, "timer/", timer, checkTimer, []mutation{
		{"hourly", "OnCalendar=minutely", "OnCalendar=hourly", "OnCalendar"},
		{"persistent", "Persistent=false", "Persistent=true", "Persistent"},
		{"other unit", "Unit=payout-load.service", "Unit=payout-worker.service", "Unit="},
	})
}
