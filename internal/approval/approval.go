// Package approval reads the approval rules of a deployment (payout load
// --approval-rules FILE) and decides which one a batch falls under: how
// many distinct people must approve it and in which role, by the batch's
// total, its largest row and the types of its destinations.
//
// A rules file holds one rule a line:
//
//	# approval rules: the strictest rule that matches a batch applies
//	total >= 50000: 2 approver
//	row >= 10000: 2 approver
//	destination phone: 1 operator
//	any: 1 approver
//
// The condition is one of "total >= AMOUNT" (the batch's total), "row >=
// AMOUNT" (its largest row), "destination card" or "destination phone"
// (it holds at least one row of that type) and "any" (every batch); the
// requirement is a count of distinct approvers, 1 to 9, and a role of
// internal/access (approver, operator, admin or maker; "approvers" is
// read as "approver"). Amounts are plain decimals, compared exactly.
// Blank lines and lines starting with # are skipped.
//
// Of the rules that match a batch, the strictest applies: the one that
// asks for the most approvers, the earlier line when two ask for as
// many. Adding a rule can so only raise what a batch needs, never lower
// it, and the order of the lines matters only between equals. The rule
// is recorded on the batch when it is loaded (ledger.Batch.Approval):
// changing the file later changes nothing for a batch already waiting.
//
// The package decides nothing about money moving: the loader holds a
// batch a rule matches, and the ledger counts the approvals.
package approval

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/money"
)

// Kind is what a rule's condition looks at.
type Kind string

// The kinds of condition.
const (
	Total       Kind = "total"       // the batch's total >= Amount
	LargestRow  Kind = "row"         // the batch's largest row >= Amount
	Destination Kind = "destination" // the batch holds a row of type Dest
	Any         Kind = "any"         // every batch
)

// The destination types a rule may name.
const (
	Card  = "card"
	Phone = "phone"
)

// MaxApprovers is the most approvers a rule may ask for.
const MaxApprovers = 9

// amountScale is the most decimals an amount of a rule may have.
const amountScale = 18

// Rule is one line of a rules file.
type Rule struct {
	Source string // "FILE:LINE" ("" for a rule not read from a file)
	Kind   Kind
	Amount money.Amount // Total, LargestRow
	Dest   string       // Destination: Card or Phone
	N      int          // distinct approvers, 1..MaxApprovers
	Role   access.Role  // the role each approver must hold
}

// Condition is the rule's condition as written in a rules file.
func (r Rule) Condition() string {
	switch r.Kind {
	case Total, LargestRow:
		return string(r.Kind) + " >= " + r.Amount.String()
	case Destination:
		return "destination " + r.Dest
	}
	return string(r.Kind)
}

// String is the rule as a rules file writes it: "total >= 50000: 2
// approver".
func (r Rule) String() string {
	return fmt.Sprintf("%s: %d %s", r.Condition(), r.N, r.Role)
}

// Facts are what the rules look at in a batch.
type Facts struct {
	Total   money.Amount
	Largest money.Amount // the largest row
	Cards   int          // rows paid to a card
	Phones  int          // rows paid to a phone (a telecom operator)
}

// Matches says whether the rule applies to a batch with facts f.
func (r Rule) Matches(f Facts) bool {
	switch r.Kind {
	case Total:
		return f.Total.Cmp(r.Amount) >= 0
	case LargestRow:
		return f.Largest.Cmp(r.Amount) >= 0
	case Destination:
		if r.Dest == Card {
			return f.Cards > 0
		}
		return f.Phones > 0
	case Any:
		return true
	}
	return false
}

// Set is a rules file read.
type Set struct {
	Rules []Rule
}

// Empty says whether the set holds no rule.
func (s Set) Empty() bool { return len(s.Rules) == 0 }

// Match returns the rule that applies to a batch with facts f: of the
// rules that match, the one asking for the most approvers, the earlier
// when two ask for as many. ok is false when no rule matches.
func (s Set) Match(f Facts) (Rule, bool) {
	var (
		best Rule
		ok   bool
	)
	for _, r := range s.Rules {
		if r.Matches(f) && (!ok || r.N > best.N) {
			best, ok = r, true
		}
	}
	return best, ok
}

// ErrRules is matched by every error of a rules file.
var ErrRules = errors.New("approval rules")

// FileError lists every wrong line of a rules file, one "FILE:LINE: what"
// a line.
type FileError struct {
	Lines []string
}

func (e *FileError) Error() string { return strings.Join(e.Lines, "\n") }

// Is makes every FileError match ErrRules.
func (e *FileError) Is(target error) bool { return target == ErrRules }

// Load reads the rules file at path (errors name it by its base name).
func Load(path string) (Set, error) {
	f, err := os.Open(path)
	if err != nil {
		return Set{}, fmt.Errorf("approval rules: %w", err)
	}
	defer f.Close()
	return Parse(filepath.Base(path), f)
}

// Parse reads a rules file named name from r. A file with a wrong line
// is refused whole, with every wrong line listed (*FileError).
func Parse(name string, r io.Reader) (Set, error) {
	var (
		set  Set
		errs []string
		n    int
	)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		rule, err := ParseRule(line)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s:%d: %v", name, n, err))
			continue
		}
		rule.Source = name + ":" + strconv.Itoa(n)
		set.Rules = append(set.Rules, rule)
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Sprintf("%s:%d: %v", name, n+1, err))
	}
	if len(errs) > 0 {
		return Set{}, &FileError{Lines: errs}
	}
	return set, nil
}

// ParseRule reads one rule, "CONDITION: N ROLE".
func ParseRule(line string) (Rule, error) {
	cond, need, ok := strings.Cut(line, ":")
	if !ok {
		return Rule{}, fmt.Errorf("%q: a rule is CONDITION: N ROLE (total >= 50000: 2 approver)", line)
	}
	r, err := parseCondition(strings.Fields(cond))
	if err != nil {
		return Rule{}, err
	}
	if r.N, r.Role, err = parseNeed(strings.Fields(need)); err != nil {
		return Rule{}, err
	}
	return r, nil
}

// parseCondition reads "total >= AMOUNT", "row >= AMOUNT", "destination
// card|phone" or "any".
func parseCondition(f []string) (Rule, error) {
	if len(f) == 0 {
		return Rule{}, errors.New("no condition before ':' (total >= AMOUNT, row >= AMOUNT, destination card|phone, any)")
	}
	switch k := Kind(strings.ToLower(f[0])); k {
	case Total, LargestRow:
		if len(f) != 3 || f[1] != ">=" {
			return Rule{}, fmt.Errorf("%q: write %s >= AMOUNT", strings.Join(f, " "), k)
		}
		a, err := money.Parse(f[2], amountScale)
		if err != nil {
			return Rule{}, fmt.Errorf("%s: %w", k, err)
		}
		return Rule{Kind: k, Amount: a}, nil
	case Destination:
		if len(f) != 2 || (strings.ToLower(f[1]) != Card && strings.ToLower(f[1]) != Phone) {
			return Rule{}, fmt.Errorf("%q: write destination card or destination phone", strings.Join(f, " "))
		}
		return Rule{Kind: k, Dest: strings.ToLower(f[1])}, nil
	case Any:
		if len(f) != 1 {
			return Rule{}, fmt.Errorf("%q: any takes nothing more", strings.Join(f, " "))
		}
		return Rule{Kind: k}, nil
	}
	return Rule{}, fmt.Errorf("unknown condition %q (total >= AMOUNT, row >= AMOUNT, destination card|phone, any)", f[0])
}

// parseNeed reads "N ROLE".
func parseNeed(f []string) (int, access.Role, error) {
	if len(f) != 2 {
		return 0, "", fmt.Errorf("%q after ':': write how many approvers and their role (2 approver)", strings.Join(f, " "))
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n < 1 || n > MaxApprovers {
		return 0, "", fmt.Errorf("%q approvers: a number from 1 to %d", f[0], MaxApprovers)
	}
	role, err := access.ParseRole(strings.TrimSuffix(strings.ToLower(f[1]), "s"))
	if err != nil {
		return 0, "", err
	}
	if role == access.Viewer {
		return 0, "", fmt.Errorf("role viewer: everyone signed in reads; name a role that decides (approver, operator, admin, maker)")
	}
	return n, role, nil
}

// Encode is the set in one line, rules separated by "|" (no ';', no
// newline): the loader records it in a batch's approval policy, so that
// a load resuming the batch decides with the same rules.
func (s Set) Encode() string {
	parts := make([]string, len(s.Rules))
	for i, r := range s.Rules {
		parts[i] = sourceSafe.Replace(r.Source) + "=" + r.String()
	}
	return strings.Join(parts, "|")
}

// sourceSafe keeps a rule's source (a file name) from breaking Encode's
// form.
var sourceSafe = strings.NewReplacer("|", "_", "=", "_", ";", "_", "\n", "_", "\r", "_")

// Decode reads Encode's form.
func Decode(v string) (Set, error) {
	var s Set
	if v == "" {
		return s, nil
	}
	for _, p := range strings.Split(v, "|") {
		src, text, _ := strings.Cut(p, "=")
		r, err := ParseRule(text)
		if err != nil {
			return Set{}, fmt.Errorf("recorded approval rule %q: %w", p, err)
		}
		r.Source = src
		s.Rules = append(s.Rules, r)
	}
	return s, nil
}
