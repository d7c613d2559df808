package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/acme/payout/internal/ui"
	"golang.org/x/crypto/bcrypt"
	xterm "golang.org/x/term"
)

// passwdCost is the bcrypt cost payout passwd writes: at least the users
// file's minimum, far above htpasswd -B's default of 5.
const passwdCost = 12

// minPassword is the shortest password payout passwd accepts.
const minPassword = 12

// runPasswd prints a users-file line (`NAME:HASH`) for payout ui --users,
// so that no htpasswd is needed. The password comes from the terminal
// (asked twice, not echoed) or from the first line of standard input.
func runPasswd(_ context.Context, e *env, args []string) error {
	fs := newFlags(e, "passwd", "NAME  (the password from the terminal, or the first line of standard input)")
	cost := passwdCost
	fs.IntVar(&cost, "cost", passwdCost, fmt.Sprintf("bcrypt cost, %d to %d", ui.MinUserCost, ui.MaxUserCost))
	if err := parse(e, fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErr("give one login name: payout passwd NAME >> users")
	}
	if cost < ui.MinUserCost || cost > ui.MaxUserCost {
		return usageErr("--cost %d: want %d to %d", cost, ui.MinUserCost, ui.MaxUserCost)
	}
	name := fs.Arg(0)
	pw, err := readPassword(e)
	if err != nil {
		return err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(pw), cost)
	if err != nil {
		return configErr(err)
	}
	line := name + ":" + string(hash)
	// The line must be one the UI starts with: the same rules for the name.
	if _, err := ui.ParseUsers("(payout passwd)", strings.NewReader(line+"\n")); err != nil {
		return configErr(err)
	}
	fmt.Fprintln(e.stdout, line)
	return nil
}

// readPassword reads the password from the terminal (twice, not echoed)
// when standard input is one, else the first line of standard input.
func readPassword(e *env) (string, error) {
	if f, ok := e.stdin.(*os.File); ok && xterm.IsTerminal(int(f.Fd())) {
		fmt.Fprint(e.stderr, "password: ")
		a, err := xterm.ReadPassword(int(f.Fd()))
		fmt.Fprint(e.stderr, "\nagain: ")
		b, err2 := xterm.ReadPassword(int(f.Fd()))
		fmt.Fprintln(e.stderr)
		if err = errors.Join(err, err2); err != nil {
			return "", configErr(err)
		}
		if string(a) != string(b) {
			return "", usageErr("the two passwords differ")
		}
		return checkPassword(string(a))
	}
	if e.stdin == nil {
		return "", usageErr("no password: pipe it in (the first line of standard input) or run on a terminal")
	}
	line, err := bufio.NewReader(io.LimitReader(e.stdin, 1024)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", configErr(err)
	}
	return checkPassword(strings.TrimRight(line, "\r\n"))
}

func checkPassword(pw string) (string, error) {
	if len([]rune(pw)) < minPassword {
		return "", usageErr("the password has %d characters: at least %d", len([]rune(pw)), minPassword)
	}
	if len(pw) > 72 {
		return "", usageErr("the password has %d bytes: bcrypt reads only 72", len(pw))
	}
	return pw, nil
}
