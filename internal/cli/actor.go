package cli

import (
	"errors"
	"fmt"
	"os/user"
	"strings"

	"github.com/acme/payout/internal/identity"
)

// Who acts. Every action that four-eyes or the audit trail depends on
// (load, approve, discard, cancel, resolve, pause, resume) is recorded as
// the person the operating system says runs the command: the current user
// (os/user), or, when that is root and the command came through sudo,
// SUDO_USER (the person who typed sudo). --by is no longer a choice: it may
// only name that same person (a check, kept for scripts), and naming
// anyone else is a usage error. A job run by cron, systemd or a container
// acts under its own account (e.g. payout): that account is one identity,
// recorded as such, and is not a second person for anything its own
// account loaded. SUDO_USER is believed only from root, who could
// record any name in Redis anyway.

// osAccount is the account a command runs under.
type osAccount struct {
	UID  string
	Name string
}

// accountOf returns the account the command runs under; by is the --by
// given (unused here). Tests replace it: cli's own tests run each command
// as the person its --by names, as if that person had typed it.
var accountOf = func(by string) (osAccount, error) {
	u, err := user.Current()
	if err != nil {
		return osAccount{}, err
	}
	return osAccount{UID: u.Uid, Name: u.Username}, nil
}

// actor is the identity that runs the command: the account's name, or
// SUDO_USER when the account is root (uid 0).
func actor(e *env, by string) (string, error) {
	acct, err := accountOf(by)
	if e.hooks.Account != nil {
		acct.UID, acct.Name = e.hooks.Account()
		err = nil
	}
	if err != nil {
		return "", usageErr("cannot tell who runs this command (the operating system's user): %v", err)
	}
	name, via := acct.Name, ""
	if acct.UID == "0" {
		if s := strings.TrimSpace(e.getenv("SUDO_USER")); s != "" {
			name, via = s, " (SUDO_USER, through sudo)"
		}
	}
	who, err := identity.Canonical(name)
	if err != nil {
		return "", usageErr("the operating system's user%s cannot be recorded as who acts: %v", via, err)
	}
	return who, nil
}

// errNotYou: --by names someone other than who runs the command.
var errNotYou = errors.New("--by names someone else")

// actorFor is who acts for an action recorded in the audit trail or
// compared by four-eyes: actor, after checking that --by (by, when given)
// names that same person.
func actorFor(e *env, by string) (string, error) {
	who, err := actor(e, by)
	if err != nil {
		return "", err
	}
	by = strings.TrimSpace(by)
	if by == "" {
		return who, nil
	}
	named, err := identity.Canonical(by)
	if err != nil {
		return "", usageErr("--by: %v", err)
	}
	if !identity.Same(named, who) {
		return "", &exitError{ExitUsage, fmt.Errorf(
			"--by %s: this command runs as %s (the operating system's user) and is recorded as who runs it; %s runs it under their own login (or sudo), or leave --by out: %w",
			named, who, named, errNotYou)}
	}
	return who, nil
}
