package access

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/acme/payout/internal/identity"
)

// A roles file maps people and groups to roles, one entry per line:
//
//	# who holds which role (blank lines and lines starting with # are skipped)
//	person alice: maker
//	person bob@example.com: approver, operator
//	group finance-approvers: approver
//	group payout-oncall: operator
//	default: viewer
//
// "person NAME" names one identity as the audit trail records it (the
// users file's identity, the single sign-on user, the CLI's operating
// system user; folded by internal/identity, so "Alice" is "alice").
// "group NAME" names a group of the single sign-on proxy's groups header
// (oauth2-proxy's X-Forwarded-Groups, comma-separated), matched exactly.
// "default" gives everyone signed in; without it, a person named nowhere
// holds no role and may not even read. A person holds the union of their
// own line, their groups' lines and the default. A name or group given
// twice is an error, as is an unknown role: a typo must not grant or
// withhold silently.

// Map is a roles file read.
type Map struct {
	people   map[string]Roles
	groups   map[string]Roles
	fallback Roles
}

// For returns the roles of the person name who belongs to groups.
func (m *Map) For(name string, groups []string) Roles {
	s := m.fallback
	if who, err := identity.Canonical(name); err == nil {
		s |= m.people[who]
	}
	for _, g := range groups {
		s |= m.groups[strings.TrimSpace(g)]
	}
	return s
}

// SplitGroups reads a groups header as oauth2-proxy writes it
// (X-Forwarded-Groups: "finance,payout-oncall"); empty entries are dropped.
func SplitGroups(header string) []string {
	var out []string
	for _, g := range strings.Split(header, ",") {
		if g = strings.TrimSpace(g); g != "" {
			out = append(out, g)
		}
	}
	return out
}

// ErrRolesFile is matched by every FileError.
var ErrRolesFile = errors.New("bad roles file")

// FileError is a roles file refused: Path and Line (1-based, 0 for the
// whole file) say where.
type FileError struct {
	Path string
	Line int
	Err  error
}

func (e *FileError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("roles file %s: %v", e.Path, e.Err)
	}
	return fmt.Sprintf("roles file %s:%d: %v", e.Path, e.Line, e.Err)
}

// Unwrap lets errors.Is match ErrRolesFile and the cause.
func (e *FileError) Unwrap() []error { return []error{ErrRolesFile, e.Err} }

// LoadFile reads the roles file at path.
func LoadFile(path string) (*Map, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &FileError{Path: path, Err: err}
	}
	defer f.Close()
	return Parse(path, f)
}

// Parse reads a roles file from r; path names it in errors.
func Parse(path string, r io.Reader) (*Map, error) {
	m := &Map{people: map[string]Roles{}, groups: map[string]Roles{}}
	sc := bufio.NewScanner(r)
	seenDefault := false
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := m.entry(line, &seenDefault); err != nil {
			return nil, &FileError{Path: path, Line: n, Err: err}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, &FileError{Path: path, Err: err}
	}
	return m, nil
}

func (m *Map) entry(line string, seenDefault *bool) error {
	subject, list, ok := strings.Cut(line, ":")
	if !ok {
		return errors.New(`want "person NAME: roles", "group NAME: roles" or "default: roles"`)
	}
	roles, err := ParseRoles(list)
	if err != nil {
		return err
	}
	if roles == 0 {
		return errors.New("no role named after the colon")
	}
	kind, name, _ := strings.Cut(strings.TrimSpace(subject), " ")
	name = strings.TrimSpace(name)
	switch {
	case kind == "default" && name == "":
		if *seenDefault {
			return errors.New("a second default line")
		}
		*seenDefault, m.fallback = true, roles
		return nil
	case kind == "person" && name != "":
		who, err := identity.Canonical(name)
		if err != nil {
			return err
		}
		return put(m.people, who, roles, "person")
	case kind == "group" && name != "":
		return put(m.groups, name, roles, "group")
	}
	return fmt.Errorf(`%q: want "person NAME", "group NAME" or "default" before the colon`, strings.TrimSpace(subject))
}

func put(into map[string]Roles, name string, roles Roles, kind string) error {
	if _, dup := into[name]; dup {
		return fmt.Errorf("%s %q is given twice", kind, name)
	}
	into[name] = roles
	return nil
}
