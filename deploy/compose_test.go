package deploy

import (
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// composeFile is the part of the Compose spec these checks read. Fields not
// listed are ignored: `docker compose config` (integration test) validates
// the whole file against the real schema.
type composeFile struct {
	Services map[string]composeService `json:"services"`
	Volumes  map[string]any            `json:"volumes"`
}

type composeService struct {
	Image           string            `json:"image"`
	Build           *composeBuild     `json:"build"`
	Entrypoint      []string          `json:"entrypoint"`
	Command         []string          `json:"command"`
	Environment     map[string]string `json:"environment"`
	EnvFile         any               `json:"env_file"`
	Volumes         []string          `json:"volumes"`
	Ports           []string          `json:"ports"`
	User            string            `json:"user"`
	ReadOnly        bool              `json:"read_only"`
	CapDrop         []string          `json:"cap_drop"`
	StopGracePeriod string            `json:"stop_grace_period"`
	StopSignal      string            `json:"stop_signal"`
	Healthcheck     *struct {
		Test []string `json:"test"`
	} `json:"healthcheck"`
	Deploy *struct {
		Replicas *int `json:"replicas"`
	} `json:"deploy"`
	DependsOn map[string]struct {
		Condition string `json:"condition"`
	} `json:"depends_on"`
	Networks map[string]*struct {
		IPv4Address string `json:"ipv4_address"`
	} `json:"networks"`
	Profiles []string `json:"profiles"`
}

type composeBuild struct {
	Context    string `json:"context"`
	Dockerfile string `json:"dockerfile"`
	Target     string `json:"target"`
}

var interpolation = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)((:?[-?])[^}]*)?\}`)

// envExampleKeys reads KEY=value lines of an env file.
func envExampleKeys(text string) map[string]bool {
	keys := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if k, _, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			keys[k] = true
		}
	}
	return keys
}

// checkCompose checks docker-compose.yml. dockerfileStages are the stage
// names of deploy/Dockerfile, envKeys the variables env.example defines.
func checkCompose(text string, dockerfileStages, envKeys map[string]bool) []error {
	var c composeFile
	if err := yaml.Unmarshal([]byte(text), &c); err != nil {
		return []error{fmt.Errorf("parse: %w", err)}
	}
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	for _, name := range []string{"redis", "worker", "ui", "sandbox", "cron"} {
		if _, ok := c.Services[name]; !ok {
			fail("service %s missing", name)
		}
	}
	names := make([]string, 0, len(c.Services))
	for name := range c.Services {
		names = append(names, name)
	}
	sort.Strings(names)

	// Redis: the ledger's config file, mounted and used.
	if r, ok := c.Services["redis"]; ok {
		if !strings.HasPrefix(r.Image, "redis:7") {
			fail("redis image %q, want redis:7", r.Image)
		}
		target := ""
		for _, v := range r.Volumes {
			if src, dst, ok := strings.Cut(v, ":"); ok && src == "./redis.conf" {
				target, _, _ = strings.Cut(dst, ":")
			}
		}
		if target == "" {
			fail("redis does not mount ./redis.conf")
		} else if len(r.Command) < 2 || r.Command[0] != "redis-server" || r.Command[1] != target {
			fail("redis command %q does not start redis-server with %s", r.Command, target)
		}
		if !hasDataVolume(r.Volumes, "/data") {
			fail("redis /data is not on a named volume: the AOF would die with the container")
		}
	}

	// Workers: two of them, stopped gracefully.
	workers := 0
	for _, name := range names {
		s := c.Services[name]
		if name != "worker" && !strings.HasPrefix(name, "worker-") && !strings.HasPrefix(name, "worker_") {
			continue
		}
		n := 1
		if s.Deploy != nil && s.Deploy.Replicas != nil {
			n = *s.Deploy.Replicas
		}
		workers += n
		d, err := time.ParseDuration(s.StopGracePeriod)
		if err != nil || d < 2*pspTimeout {
			fail("%s stop_grace_period %q, want at least %v for PSP requests in flight", name, s.StopGracePeriod, 2*pspTimeout)
		}
		if s.StopSignal != "" && s.StopSignal != "SIGTERM" {
			fail("%s stop_signal %s, want SIGTERM", name, s.StopSignal)
		}
	}
	if workers != 2 {
		fail("%d worker(s), want 2", workers)
	}

	// Cron: the loader every minute on the spool volume.
	if cr, ok := c.Services["cron"]; ok {
		script := strings.Join(append(cr.Entrypoint, cr.Command...), " ")
		for _, want := range []string{"load --spool /var/spool/payout", "sleep 60", "flock -n"} {
			if !strings.Contains(script, want) {
				fail("cron does not run %q", want)
			}
		}
		if !hasDataVolume(cr.Volumes, "/var/spool/payout") {
			fail("cron: the spool /var/spool/payout is not on a named volume")
		}
	}

	errs = append(errs, checkComposeSSO(c)...)

	for _, name := range names {
		s := c.Services[name]
		if name != "cron" && (s.Healthcheck == nil || len(s.Healthcheck.Test) == 0) {
			fail("%s has no healthcheck", name)
		}
		if s.Build != nil {
			if s.Build.Context != ".." || s.Build.Dockerfile != "deploy/Dockerfile" {
				fail("%s build %+v, want context .. and dockerfile deploy/Dockerfile", name, *s.Build)
			}
			if s.Build.Target != "" && !dockerfileStages[s.Build.Target] {
				fail("%s build target %q is not a stage of deploy/Dockerfile", name, s.Build.Target)
			}
		}
		if s.Build != nil && (!s.ReadOnly || !contains(s.CapDrop, "ALL")) {
			fail("%s: payout containers run read_only with cap_drop ALL", name)
		}
		if s.User == "root" || strings.HasPrefix(s.User, "0") {
			fail("%s runs as root", name)
		}
		for _, p := range s.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				fail("%s publishes %q on every interface: bind to 127.0.0.1", name, p)
			}
		}
		for _, dep := range sortedKeys(s.DependsOn) {
			if _, ok := c.Services[dep]; !ok {
				fail("%s depends on unknown service %s", name, dep)
			}
		}
		errs = append(errs, checkComposeSecrets(name, s, envKeys)...)
	}
	for _, name := range names {
		for _, v := range c.Services[name].Volumes {
			src, _, _ := strings.Cut(v, ":")
			if !strings.HasPrefix(src, ".") && !strings.HasPrefix(src, "/") {
				if _, ok := c.Volumes[src]; !ok {
					fail("%s mounts undeclared volume %s", name, src)
				}
			}
		}
	}
	return errs
}

// checkComposeSSO: oauth2-proxy (service sso) forwards to the UI and has
// a fixed address on a network it shares with the UI, and the UI
// believes the proxy's X-Forwarded-User from that address only.
func checkComposeSSO(c composeFile) []error {
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	sso, ok := c.Services["sso"]
	if !ok || !strings.Contains(sso.Image, "oauth2-proxy") {
		return []error{fmt.Errorf("no sso service running oauth2-proxy in front of the UI")}
	}
	cmd := strings.Join(sso.Command, " ")
	for _, want := range []string{"--upstream=http://ui:8080/", "--pass-user-headers=true"} {
		if !strings.Contains(cmd, want) {
			fail("sso command lacks %s", want)
		}
	}
	addr, network := "", ""
	for n, v := range sso.Networks {
		if v != nil && v.IPv4Address != "" {
			addr, network = v.IPv4Address, n
		}
	}
	ui := c.Services["ui"]
	if addr == "" {
		fail("sso has no fixed ipv4_address: the UI could not tell it from any other container")
	} else if _, shared := ui.Networks[network]; !shared {
		fail("ui is not on the sso network %s", network)
	}
	args := strings.Join(ui.Command, " ")
	if !strings.Contains(args, "--proxy-user-header X-Forwarded-User") || !strings.Contains(args, "--trusted-proxies "+addr+" ") && !strings.HasSuffix(args, "--trusted-proxies "+addr) {
		fail("ui command %q: want --proxy-user-header X-Forwarded-User and --trusted-proxies %s (the sso service)", args, addr)
	}
	return errs
}

// checkComposeSecrets: a secret reaches a container only by ${VAR}
// interpolation from deploy/.env, never as a literal in the file.
func checkComposeSecrets(name string, s composeService, envKeys map[string]bool) []error {
	var errs []error
	check := func(where, value string) {
		for _, m := range interpolation.FindAllStringSubmatch(value, -1) {
			if !envKeys[m[1]] && m[3] != ":-" && m[3] != "-" {
				errs = append(errs, fmt.Errorf("%s %s: ${%s} is not defined in env.example", name, where, m[1]))
			}
		}
	}
	for _, k := range sortedKeys(s.Environment) {
		v := s.Environment[k]
		check(k, v)
		if !secretName.MatchString(k) || strings.HasSuffix(k, "_USER") {
			continue
		}
		rest := interpolation.ReplaceAllString(v, "")
		if u, err := url.Parse(rest); err == nil && u.Scheme != "" {
			if p, set := u.User.Password(); set && p != "" {
				errs = append(errs, fmt.Errorf("%s %s: literal password in the URL", name, k))
			}
			if !strings.Contains(v, "${") {
				errs = append(errs, fmt.Errorf("%s %s: literal secret URL", name, k))
			}
			continue
		}
		if rest != "" {
			errs = append(errs, fmt.Errorf("%s %s: literal secret value, want ${VAR} from deploy/.env", name, k))
		}
	}
	args := append(append([]string{}, s.Entrypoint...), s.Command...)
	for i, a := range args {
		check("command", a)
		if secretName.MatchString(a) && strings.HasPrefix(a, "--") && i+1 < len(args) && interpolation.ReplaceAllString(args[i+1], "") != "" {
			errs = append(errs, fmt.Errorf("%s command: literal value after %s", name, a))
		}
	}
	return errs
}

func hasDataVolume(vols []string, target string) bool {
	for _, v := range vols {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && parts[1] == target && !strings.HasPrefix(parts[0], ".") && !strings.HasPrefix(parts[0], "/") {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func dockerfileStageNames(t *testing.T) map[string]bool {
	t.Helper()
	_, stages, err := parseDockerfile(readFile(t, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, st := range stages {
		names[st.name] = st.name != ""
	}
	return names
}

func TestCompose(t *testing.T) {
	good := readFile(t, "docker-compose.yml")
	stages := dockerfileStageNames(t)
	envKeys := envExampleKeys(readFile(t, "env.example"))
	requireClean(t, "docker-compose.yml", checkCompose(good, stages, envKeys))
	requireCaught(t, "", good, func(s string) []error { return checkCompose(s, stages, envKeys) }, []mutation{
		{"one worker", "replicas: 2", "replicas: 1", "1 worker(s)"},
		{"no cron", "  cron:\n", "  cronjob:\n", "service cron missing"},
		{"no redis.conf", "./redis.conf:/usr/local/etc/redis/redis.conf:ro", "./redis7.conf:/usr/local/etc/redis/redis.conf:ro", "does not mount ./redis.conf"},
		{"conf unused", "      - /usr/local/etc/redis/redis.conf\n", "      - /etc/redis.conf\n", "does not start redis-server"},
		{"literal password", "PAYOUT_UI_PASSWORD: ${PAYOUT_UI_PASSWORD:?set PAYOUT_UI_PASSWORD in deploy/.env}", "PAYOUT_UI_PASSWORD: hunter2", "literal secret value"},
		{"literal url password", "redis://:${REDIS_PASSWORD:?set REDIS_PASSWORD in deploy/.env}@redis", "redis://:hunter2@redis", "literal password in the URL"},
		{"literal requirepass", "      - ${REDIS_PASSWORD:?set REDIS_PASSWORD in deploy/.env}\n", "      - hunter2\n", "literal value after --requirepass"},
		{"undefined variable", "${PAYOUT_DATA_KEY:?set", "${PAYOUT_DATA_KEYS:?set", "PAYOUT_DATA_KEYS} is not defined"},
		{"short grace", "stop_grace_period: 90s", "stop_grace_period: 10s", "stop_grace_period"},
		{"bad target", "target: cron", "target: crond", "not a stage"},
		{"public port", `"127.0.0.1:8080:8080"`, `"8080:8080"`, "every interface"},
		{"not yaml", "services:", "services: [", "parse"},
		{"no sso", "image: quay.io/oauth2-proxy/oauth2-proxy:v7.7.1", "image: nginx:1", "no sso service running oauth2-proxy"},
		{"sso address moved", "ipv4_address: 172.30.80.10", "ipv4_address: 172.30.80.11", "--trusted-proxies 172.30.80.11"},
		{"sso without fixed address", "        ipv4_address: 172.30.80.10\n", "", "no fixed ipv4_address"},
		{"header not believed", `"--proxy-user-header", "X-Forwarded-User"`, `"--read-only"`, "--proxy-user-header X-Forwarded-User"},
		{"ui off the sso network", "      sso: {}\n", "", "not on the sso network"},
	})
	t.Run("no worker healthcheck", func(t *testing.T) {
		bad := mutation{"", `      test: ["CMD", "/healthcheck", "http://127.0.0.1:9102/metrics"]`, "      test: []", ""}.apply(t, good)
		requireErr(t, checkCompose(bad, stages, envKeys), "worker has no healthcheck")
	})
	t.Run("undeclared volume", func(t *testing.T) {
		bad := mutation{"", "      - spool:/var/spool/payout", "      - spools:/var/spool/payout", ""}.apply(t, good)
		requireErr(t, checkCompose(bad, stages, envKeys), "undeclared volume spools")
	})
}
