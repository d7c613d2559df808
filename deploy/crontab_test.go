package deploy

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

var cronEnvLine = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// checkCrontab checks an /etc/cron.d file (fields: 5 time fields, user,
// command) that must hold exactly one job: the loader every minute.
func checkCrontab(text string) []error {
	var errs []error
	if !strings.HasSuffix(text, "\n") {
		errs = append(errs, fmt.Errorf("the last line must end with a newline (cron ignores it otherwise)"))
	}
	var jobs []string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || cronEnvLine.MatchString(line) {
			continue
		}
		jobs = append(jobs, line)
	}
	if len(jobs) != 1 {
		return append(errs, fmt.Errorf("want exactly 1 job line, found %d", len(jobs)))
	}
	f := strings.Fields(jobs[0])
	if len(f) < 7 {
		return append(errs, fmt.Errorf("job line has %d fields, want 5 time fields, a user and a command", len(f)))
	}
	if got := strings.Join(f[:5], " "); got != "* * * * *" {
		errs = append(errs, fmt.Errorf("schedule %q, want every minute %q", got, "* * * * *"))
	}
	if user := f[5]; user == "root" || user == "0" {
		errs = append(errs, fmt.Errorf("job runs as %s, want an unprivileged user", user))
	}
	cmd := strings.Join(f[6:], " ")
	for _, want := range []struct{ text, why string }{
		{"flock -n ", "skip a tick while the previous run holds the lock"},
		{"payout load --spool /var/spool/payout", "the spool loader"},
		{". /etc/payout/payout.env", "the shared environment file"},
		{"set -a", "export the environment file's variables"},
	} {
		if !strings.Contains(cmd, want.text) {
			errs = append(errs, fmt.Errorf("command lacks %q (%s)", want.text, want.why))
		}
	}
	if !strings.Contains(cmd, "logger") && !strings.Contains(cmd, ">>") {
		errs = append(errs, fmt.Errorf("command output goes nowhere: pipe to logger or append to a file"))
	}
	if strings.Contains(cmd, "%") {
		errs = append(errs, fmt.Errorf("command contains %%, which cron turns into a newline"))
	}
	if i, j := strings.Index(cmd, "flock"), strings.Index(cmd, "payout load"); i > j {
		errs = append(errs, fmt.Errorf("flock must wrap payout load"))
	}
	return errs
}

func TestCrontab(t *testing.T) {
	good := readFile(t, "crontab")
	requireClean(t, "crontab", checkCrontab(good))
	requireCaught(t, "", good, checkCrontab, []mutation{
		{"every five minutes", "* * * * * payout", "*/5 * * * * payout", "every minute"},
		{"four time fields", "* * * * * payout", "* * * * payout", "schedule"},
		{"no flock -n", "flock -n ", "flock ", "flock -n"},
		{"as root", "* * * * * payout", "* * * * * root", "unprivileged"},
		{"no logging", " 2>&1 | logger -t payout-load -p user.info", "", "output goes nowhere"},
		{"percent sign", "user.info", "user.info %", "newline"},
		{"no env file", ". /etc/payout/payout.env;", "", "environment file"},
		{"wrong command", "payout load --spool", "payout load", "spool loader"},
		{"second job", "SHELL=/bin/sh", "0 0 * * * payout true\nSHELL=/bin/sh", "exactly 1 job"},
	})
	t.Run("no final newline", func(t *testing.T) {
		requireErr(t, checkCrontab(strings.TrimSuffix(good, "\n")), "newline")
	})
}
