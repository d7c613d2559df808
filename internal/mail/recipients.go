package mail

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	netmail "net/mail"
	"os"
	"regexp"
	"slices"
	"strings"
)

// The roles the product mails by itself. Any other role name may be
// configured too: an approval rule that names a role (Config.ApproverRole)
// has its approvers mailed.
const (
	// RoleApprover: the approvers of a batch awaiting approval, unless the
	// batch's rule names another role.
	RoleApprover = "approver"
	// RoleOperator: the digest of payouts needing review, and the owner of
	// a failing webhook endpoint that has none of its own.
	RoleOperator = "operator"
	// RoleMaker: the batch-final mail of a maker (who loaded the batch)
	// without a person line of their own, e.g. a shared finance mailbox.
	RoleMaker = "maker"
)

// Recipients is who gets what: addresses by role, by person (a name as
// package identity records it: the OS user or the signed-in login) and by
// webhook endpoint, read from the recipients file (ParseRecipients).
type Recipients struct {
	roles     map[string][]*netmail.Address
	people    map[string]*netmail.Address
	endpoints map[string][]*netmail.Address
}

// ConfigError is one wrong line of the recipients file.
type ConfigError struct {
	File string
	Line int
	Msg  string
}

func (e *ConfigError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// ErrConfig is matched by every error of a recipients file.
var ErrConfig = errors.New("mail: bad recipients file")

// Is makes a ConfigError match ErrConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrConfig }

var (
	roleName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)
	// aliases are the plural forms of the roles the product mails.
	aliases = map[string]string{"approvers": RoleApprover, "operators": RoleOperator, "makers": RoleMaker}
)

// LoadRecipients reads the recipients file at path.
func LoadRecipients(path string) (*Recipients, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("mail: recipients file: %w", err)
	}
	defer f.Close()
	return ParseRecipients(path, f)
}

// member is a role's or endpoint's entry awaiting the person lines: an
// address, or a person's name.
type member struct {
	line int
	text string
}

// parser collects the lines of a recipients file.
type parser struct {
	name      string
	errs      []*ConfigError
	people    map[string]*netmail.Address
	roles     map[string][]member
	endpoints map[string][]member
}

func (p *parser) fail(line int, format string, args ...any) {
	p.errs = append(p.errs, &ConfigError{File: p.name, Line: line, Msg: fmt.Sprintf(format, args...)})
}

// ParseRecipients reads a recipients file named name (for its errors). A
// line is blank, a comment (#...), or KEY: VALUE (the colon followed by a
// space or the end of the line):
//
//	role NAME: MEMBER, MEMBER...    the members of role NAME (repeatable)
//	approvers: / operators: / makers:  role approver / operator / maker
//	person NAME: ADDRESS            the address of a person
//	endpoint NAME: MEMBER, ...      the owners of a webhook endpoint
//
// A MEMBER is an address ("a@example.com", "Ann <a@example.com>") or the
// NAME of a person line (anywhere in the file). Every wrong line is
// reported as FILE:LINE: what is wrong, all at once.
func ParseRecipients(name string, r io.Reader) (*Recipients, error) {
	p := &parser{name: name, people: map[string]*netmail.Address{}, roles: map[string][]member{}, endpoints: map[string][]member{}}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		p.line(n, strings.TrimSpace(sc.Text()))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("mail: read %s: %w", name, err)
	}
	rc := &Recipients{roles: map[string][]*netmail.Address{}, people: p.people, endpoints: map[string][]*netmail.Address{}}
	for role, ms := range p.roles {
		rc.roles[role] = p.resolve(ms)
	}
	for ep, ms := range p.endpoints {
		rc.endpoints[ep] = p.resolve(ms)
	}
	if len(p.errs) > 0 {
		slices.SortStableFunc(p.errs, func(a, b *ConfigError) int { return a.Line - b.Line })
		errs := make([]error, len(p.errs))
		for i, e := range p.errs {
			errs[i] = e
		}
		return nil, errors.Join(errs...)
	}
	return rc, nil
}

// line reads line n.
func (p *parser) line(n int, s string) {
	if s == "" || strings.HasPrefix(s, "#") {
		return
	}
	key, value, ok := splitKey(s)
	if !ok {
		p.fail(n, "want KEY: VALUE (role NAME:, approvers:, operators:, makers:, person NAME:, endpoint NAME:)")
		return
	}
	kind, arg, _ := strings.Cut(key, " ")
	arg = strings.TrimSpace(arg)
	if role, ok := aliases[kind]; ok && arg == "" {
		kind, arg = "role", role
	}
	switch kind {
	case "role":
		if !roleName.MatchString(arg) {
			p.fail(n, "role %q: a role name is lower case letters, digits, - and _", arg)
			return
		}
		p.roles[arg] = append(p.roles[arg], p.members(n, value)...)
	case "person":
		p.person(n, arg, value)
	case "endpoint":
		if arg == "" {
			p.fail(n, "endpoint without a name")
			return
		}
		p.endpoints[arg] = append(p.endpoints[arg], p.members(n, value)...)
	default:
		p.fail(n, "unknown key %q (role NAME, approvers, operators, makers, person NAME, endpoint NAME)", key)
	}
}

// splitKey cuts s at its first colon followed by a space or the end: an
// endpoint's URL keeps its "https://".
func splitKey(s string) (key, value string, ok bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == ':' && (i+1 == len(s) || s[i+1] == ' ' || s[i+1] == '\t') {
			return strings.TrimSpace(s[:i]), strings.TrimSpace(s[i+1:]), true
		}
	}
	return "", "", false
}

func (p *parser) person(n int, name, value string) {
	switch {
	case name == "" || strings.ContainsAny(name, ", \t"):
		p.fail(n, "person %q: a person's name is one word, as they sign in", name)
	case p.people[name] != nil:
		p.fail(n, "person %q is given twice", name)
	default:
		a, err := netmail.ParseAddress(value)
		if err != nil {
			p.fail(n, "person %s: address %q: %v", name, value, err)
			return
		}
		p.people[name] = a
	}
}

func (p *parser) members(n int, value string) []member {
	var out []member
	for item := range strings.SplitSeq(value, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, member{line: n, text: item})
		}
	}
	if len(out) == 0 {
		p.fail(n, "no address")
	}
	return out
}

// resolve turns members into addresses, once every person line is read,
// leaving out repeats.
func (p *parser) resolve(ms []member) []*netmail.Address {
	var out []*netmail.Address
	for _, m := range ms {
		a := p.people[m.text]
		if a == nil && strings.Contains(m.text, "@") {
			var err error
			if a, err = netmail.ParseAddress(m.text); err != nil {
				p.fail(m.line, "address %q: %v", m.text, err)
				continue
			}
		}
		if a == nil {
			p.fail(m.line, "%q is neither an address nor a person of a person line", m.text)
			continue
		}
		if !slices.ContainsFunc(out, func(b *netmail.Address) bool { return sameAddress(a, b) }) {
			out = append(out, a)
		}
	}
	return out
}

func sameAddress(a, b *netmail.Address) bool { return strings.EqualFold(a.Address, b.Address) }

// Role returns the addresses of role (none when it has no line).
func (rc *Recipients) Role(role string) []*netmail.Address {
	if rc == nil {
		return nil
	}
	return rc.roles[role]
}

// Person returns the address of a person, or nil.
func (rc *Recipients) Person(name string) *netmail.Address {
	if rc == nil {
		return nil
	}
	return rc.people[name]
}

// Endpoint returns the owners of a webhook endpoint, or the operators
// when it has none of its own.
func (rc *Recipients) Endpoint(name string) []*netmail.Address {
	if rc == nil {
		return nil
	}
	if a := rc.endpoints[name]; len(a) > 0 {
		return a
	}
	return rc.roles[RoleOperator]
}

// Without returns as without the address of b (nil b: as).
func Without(as []*netmail.Address, b *netmail.Address) []*netmail.Address {
	if b == nil {
		return as
	}
	return slices.DeleteFunc(slices.Clone(as), func(a *netmail.Address) bool { return sameAddress(a, b) })
}
