package cli

import (
	"context"
	"flag"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/operator"
)

// rolesUsage is the --roles-file of payout ui and of every person's
// command (PAYOUT_ROLES_FILE).
const rolesUsage = "roles file: who holds which role (viewer, maker, approver, operator, admin), by person and by single sign-on group (docs/controls.md, \"Roles\"); " +
	"without it everyone may do everything but administer"

// rolesFlags is --roles-file: the operating system's user of a person's
// command, or the console's signed-in person, mapped to their roles.
type rolesFlags struct {
	file string
}

func (f *rolesFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.file, "roles-file", "", rolesUsage)
}

// load reads the roles file (nil without one: everyone holds
// access.Everyone); a bad file is a usage error naming its line.
func (f *rolesFlags) load() (*access.Map, error) {
	if f.file == "" {
		return nil, nil
	}
	m, err := access.LoadFile(f.file)
	if err != nil {
		return nil, configErr(err)
	}
	return m, nil
}

// principal is who, the operating system's user running the command
// (actorFor), with the roles the roles file gives them (the person's
// line and the default; the CLI has no single sign-on groups).
func (f *rolesFlags) principal(who string) (access.Principal, error) {
	m, err := f.load()
	if err != nil {
		return access.Principal{}, err
	}
	roles := access.Everyone
	if m != nil {
		roles = m.For(who, nil)
	}
	return access.Principal{Name: who, Roles: roles}, nil
}

// actions binds acts to who's principal: the commands then refuse what
// who's roles do not allow (operator.Check).
func (f *rolesFlags) actions(acts *operator.Actions, who string) (*operator.Actions, error) {
	p, err := f.principal(who)
	if err != nil {
		return nil, err
	}
	return acts.As(p), nil
}

// mayLoad refuses a load by who unless their roles allow it (maker). A
// spool run is not a person's load: its files are loaded by their
// senders, and it is not checked.
func (f *rolesFlags) mayLoad(who string) error {
	return f.may(context.Background(), who, "load", access.Load)
}

// may refuses command cmd (action act) run by who unless their roles
// allow it (operator.Check): the commands that act outside
// operator.Actions (load, reconcile, archive, token) check here.
func (f *rolesFlags) may(ctx context.Context, who, cmd string, act access.Action) error {
	p, err := f.principal(who)
	if err != nil {
		return err
	}
	if _, err := operator.Check(ctx, p, cmd, act, who); err != nil {
		return commandErr(err)
	}
	return nil
}

// mayRead refuses the read cmd (status, history, report, a dry run)
// unless the operating system's user holds the viewer role
// (operator.MayRead).
func (f *rolesFlags) mayRead(ctx context.Context, e *env, cmd string) error {
	return f.mayRun(ctx, e, cmd, access.Read)
}

// mayRun refuses command cmd (action act) unless the operating system's
// user holds the role act needs: reads through operator.MayRead, the
// rest through operator.Check. It is for the commands that record no
// name of their own (reads, reconcile, archive). Without a roles file
// everyone holds every role but admin, and the user is not looked up: a
// command in a container whose user the system does not name still runs.
func (f *rolesFlags) mayRun(ctx context.Context, e *env, cmd string, act access.Action) error {
	p := access.Principal{Roles: access.Everyone}
	if f.file != "" {
		who, err := actor(e, "")
		if err != nil {
			return err
		}
		if p, err = f.principal(who); err != nil {
			return err
		}
	}
	var err error
	if act == access.Read {
		err = operator.MayRead(ctx, p, cmd)
	} else {
		_, err = operator.Check(ctx, p, cmd, act, "")
	}
	if err != nil {
		return commandErr(err)
	}
	return nil
}
