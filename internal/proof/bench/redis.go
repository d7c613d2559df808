package bench

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/acme/payout/internal/proof/testenv/redistest"
	"github.com/redis/go-redis/v9"
)

// redisGrace is how long a stopping redis-server may take before it is
// killed.
const redisGrace = 10 * time.Second

// startRedis starts the bench's redis-server: no persistence, loopback
// only, its own port and directory dir, warnings only in its log.
func startRedis(ctx context.Context, dir string) (*redistest.Server, error) {
	s, err := redistest.Launch(ctx, redistest.Config{Dir: dir, Extra: []string{"--loglevel", "warning"}})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	return s, nil
}

// RedisVersion returns redis_version from INFO server.
func RedisVersion(ctx context.Context, rdb redis.UniversalClient) (string, error) {
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return "", fmt.Errorf("bench: redis INFO: %w", err)
	}
	return infoField(info, "redis_version"), nil
}

// infoField returns the value of key in an INFO answer, or "".
func infoField(info, key string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), key+":"); ok {
			return v
		}
	}
	return ""
}

// CommandStat is one line of INFO commandstats.
type CommandStat struct {
	Name  string
	Calls int64
	Usec  int64
}

// CommandStats parses an INFO commandstats answer, most time first.
func CommandStats(info string) []CommandStat {
	var out []CommandStat
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, found := strings.CutPrefix(name, "cmdstat_")
		if !ok || !found {
			continue
		}
		st := CommandStat{Name: name}
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				st.Calls = n
			case "usec":
				st.Usec = n
			}
		}
		out = append(out, st)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Usec > out[j].Usec })
	return out
}

// benchCommands are the bench's own commands, left out of FormatStats.
var benchCommands = map[string]bool{"flushall": true, "config|resetstat": true, "info": true}

// FormatStats prints the first k stats as "evalsha 120,000 x 31.0 us",
// leaving out the bench's own commands. The time of EVALSHA includes the
// commands its scripts run, which are also counted under their own names.
func FormatStats(st []CommandStat, k int) string {
	var parts []string
	for _, s := range st {
		if len(parts) == k {
			break
		}
		if benchCommands[s.Name] {
			continue
		}
		per := 0.0
		if s.Calls > 0 {
			per = float64(s.Usec) / float64(s.Calls)
		}
		parts = append(parts, fmt.Sprintf("%s %s x %.1f us", s.Name, thousands(s.Calls), per))
	}
	return strings.Join(parts, ", ")
}
