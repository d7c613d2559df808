// Package flagenv fills command-line flags from environment variables:
// every flag not given on the command line takes the value of its variable
// when that is set, so flags always win over the environment.
package flagenv

import (
	"errors"
	"flag"
	"fmt"
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
