// Package flagenv fills command-line flags from environment variables:
// every flag not given on the command line takes the value of its variable
// when that is set, so flags always win over the environment. A flag may
// also have a deprecated variable, still read with a notice, and Unknown
// finds the variables of a prefix that no flag or secret reads, with the
// closest known name.
package flagenv

import (
	"errors"
	"flag"
	"fmt"
	"sort"
	"strings"
)

// Name is the usual variable of a flag: prefix + the flag name in upper
// case with '-' as '_' (prefix "PAYOUT_", flag "psp-url": PAYOUT_PSP_URL).
func Name(prefix, flagName string) string {
	return prefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Apply sets every flag of the parsed fs that was not given on the command
// line from the variable name(flag), if lookup finds it. Values that do not
// parse are reported together, each naming its variable (never its value:
// it may be a secret).
func Apply(fs *flag.FlagSet, name func(flagName string) string, lookup func(string) (string, bool)) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] {
			return
		}
		env := name(f.Name)
		v, ok := lookup(env)
		if !ok {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, fmt.Errorf("environment variable %s: invalid value for --%s", env, f.Name))
		}
	})
	return errors.Join(errs...)
}

// Rule names the variables of flags: Name the variable of a flag, Old its
// deprecated variable ("" when it has none; may be nil).
type Rule struct {
	Name func(flagName string) string
	Old  func(flagName string) string
}

// ApplyRule is Apply with deprecated variables: a flag not given on the
// command line takes its variable's value, else its deprecated variable's.
// Every deprecated variable that is set gives a notice naming the new one
// (and saying that the new one wins when both are set). Notices and errors
// name variables, never their values.
func ApplyRule(fs *flag.FlagSet, r Rule, lookup func(string) (string, bool)) (notices []string, err error) {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		env := r.Name(f.Name)
		v, ok := lookup(env)
		if old := oldName(r, f.Name); old != "" {
			if ov, oldSet := lookup(old); oldSet {
				switch {
				case given[f.Name]:
					notices = append(notices, fmt.Sprintf("%s is deprecated: rename it %s (--%s on the command line wins over both)", old, env, f.Name))
				case ok:
					notices = append(notices, fmt.Sprintf("%s and %s are both set: %s is used; %s is deprecated, remove it", old, env, env, old))
				default:
					notices = append(notices, fmt.Sprintf("%s is deprecated: rename it %s (read this time)", old, env))
					env, v, ok = old, ov, true
				}
			}
		}
		if given[f.Name] || !ok {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, fmt.Errorf("environment variable %s: invalid value for --%s", env, f.Name))
		}
	})
	return notices, errors.Join(errs...)
}

func oldName(r Rule, flagName string) string {
	if r.Old == nil {
		return ""
	}
	return r.Old(flagName)
}

// Stray is a variable of the prefix that nothing reads.
type Stray struct {
	Name    string // the variable
	Closest string // the known name closest to it ("" when none is near)
}

// Unknown returns the variables of environ (KEY=VALUE entries) that start
// with prefix, are not in known and start with none of ignore, sorted, each
// with the closest known name by edit distance after the prefix (when that
// distance is at most half the length of the name after the prefix).
// Values are never looked at.
func Unknown(environ []string, prefix string, known map[string]bool, ignore ...string) []Stray {
	names := make([]string, 0, len(known))
	for k := range known {
		names = append(names, k)
	}
	sort.Strings(names)
	var out []Stray
	seen := map[string]bool{}
next:
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, prefix) || known[name] || seen[name] {
			continue
		}
		for _, p := range ignore {
			if strings.HasPrefix(name, p) {
				continue next
			}
		}
		seen[name] = true
		out = append(out, Stray{Name: name, Closest: closest(name, names, prefix)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Closest returns the name of names closest to name by edit distance, when
// that distance is at most half of name's length; else "". Flag names are
// matched this way for "did you mean".
func Closest(name string, names []string) string { return closest(name, names, "") }

func closest(name string, names []string, prefix string) string {
	rest := strings.TrimPrefix(name, prefix)
	best, bestD := "", len(rest)/2+1
	for _, k := range names {
		if d := distance(rest, strings.TrimPrefix(k, prefix)); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// distance is the Levenshtein distance of a and b (bytes: variable names
// are ASCII).
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
