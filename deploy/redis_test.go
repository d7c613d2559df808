package deploy

import (
	"fmt"
	"strings"
	"testing"
)

// parseRedisConf returns directive -> argument lists, in file order. Keys
// are lower case; double-quoted arguments are unquoted.
func parseRedisConf(text string) (map[string][][]string, error) {
	conf := map[string][][]string{}
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var args []string
		for rest := line; rest != ""; rest = strings.TrimLeft(rest, " \t") {
			if rest[0] == '"' {
				end := strings.IndexByte(rest[1:], '"')
				if end < 0 {
					return nil, fmt.Errorf("line %d: unterminated quote", n+1)
				}
				args = append(args, rest[1:end+1])
				rest = rest[end+2:]
				continue
			}
			f, r, _ := strings.Cut(rest, " ")
			args = append(args, f)
			rest = r
		}
		key := strings.ToLower(args[0])
		conf[key] = append(conf[key], args[1:])
	}
	return conf, nil
}

// checkRedisConf checks the durability settings the ledger relies on.
func checkRedisConf(text string) []error {
	conf, err := parseRedisConf(text)
	if err != nil {
		return []error{err}
	}
	var errs []error
	single := func(key string) string {
		v := conf[key]
		if len(v) == 0 {
			return ""
		}
		return strings.Join(v[len(v)-1], " ")
	}
	for key, want := range map[string]string{
		"appendonly": "yes",
		// The ledger writes `submitting` before the POST: only an fsync
		// per write makes that promise survive a power cut (redis.conf
		// explains the trade-off with everysec).
		"appendfsync":               "always",
		"no-appendfsync-on-rewrite": "no",
		"aof-use-rdb-preamble":      "yes",
		"maxmemory-policy":          "noeviction",
	} {
		if got := single(key); got != want {
			errs = append(errs, fmt.Errorf("%s %q, want %q", key, got, want))
		}
	}
	for _, args := range conf["save"] {
		if len(args) == 0 || (len(args) == 1 && args[0] == "") {
			errs = append(errs, fmt.Errorf(`save "" disables the RDB snapshots that backups ship`))
		}
	}
	if len(conf["save"]) == 0 {
		errs = append(errs, fmt.Errorf("no save rule: keep RDB snapshots for backups"))
	}
	for _, key := range []string{"dir", "requirepass", "masterauth"} {
		if len(conf[key]) > 0 {
			errs = append(errs, fmt.Errorf("%s is set: it belongs to the deployment (command line or include), not this shared file", key))
		}
	}
	return errs
}

func TestRedisConf(t *testing.T) {
	good := readFile(t, "redis.conf")
	requireClean(t, "redis.conf", checkRedisConf(good))
	requireCaught(t, "", good, checkRedisConf, []mutation{
		{"no aof", "appendonly yes", "appendonly no", "appendonly"},
		{"everysec", "appendfsync always", "appendfsync everysec", "appendfsync"},
		{"later override", "tcp-keepalive 300", "tcp-keepalive 300\nappendfsync no", "appendfsync"},
		{"evicting", "maxmemory-policy noeviction", "maxmemory-policy allkeys-lru", "maxmemory-policy"},
		{"no fsync on rewrite", "no-appendfsync-on-rewrite no", "no-appendfsync-on-rewrite yes", "no-appendfsync-on-rewrite"},
		{"snapshots off", "save 3600 1 300 100 60 10000", `save ""`, `save ""`},
		{"password in file", "protected-mode yes", "protected-mode yes\nrequirepass hunter2", "requirepass"},
		{"dir in file", "protected-mode yes", "protected-mode yes\ndir /data", "dir is set"},
		{"bad quote", "dbfilename dump.rdb", `dbfilename "dump.rdb`, "unterminated"},
	})
}
