package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// dfInstr is one Dockerfile instruction after joining continuation lines.
type dfInstr struct {
	line int    // first line, 1-based
	cmd  string // upper case: FROM, RUN, COPY...
	args string
}

// dfStage is one FROM ... [AS name] and its instructions.
type dfStage struct {
	index  int
	image  string // with global ARGs expanded
	name   string // lower case, "" when unnamed
	instrs []dfInstr
}

// parseDockerfile splits a Dockerfile into global ARGs and stages.
func parseDockerfile(text string) (args map[string]string, stages []*dfStage, err error) {
	args = map[string]string{}
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		start := i + 1
		line := strings.TrimSpace(lines[i])
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		for strings.HasSuffix(line, `\`) {
			line = strings.TrimSuffix(line, `\`)
			// Comment lines inside a continuation are dropped, as Docker does.
			for i+1 < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i+1]), "#") {
				i++
			}
			if i+1 >= len(lines) {
				return nil, nil, fmt.Errorf("line %d: continuation at end of file", start)
			}
			i++
			line += " " + strings.TrimSpace(lines[i])
		}
		cmd, rest, _ := strings.Cut(line, " ")
		in := dfInstr{line: start, cmd: strings.ToUpper(cmd), args: strings.TrimSpace(rest)}
		switch {
		case in.cmd == "FROM":
			f := strings.Fields(in.args)
			st := &dfStage{index: len(stages)}
			for len(f) > 0 && strings.HasPrefix(f[0], "--") {
				f = f[1:]
			}
			switch {
			case len(f) == 1:
			case len(f) == 3 && strings.EqualFold(f[1], "AS"):
				st.name = strings.ToLower(f[2])
			default:
				return nil, nil, fmt.Errorf("line %d: bad FROM %q", start, in.args)
			}
			if len(f) == 0 {
				return nil, nil, fmt.Errorf("line %d: FROM without image", start)
			}
			st.image = os.Expand(f[0], func(k string) string { return args[k] })
			stages = append(stages, st)
		case len(stages) == 0:
			if in.cmd != "ARG" {
				return nil, nil, fmt.Errorf("line %d: %s before the first FROM", start, in.cmd)
			}
			k, v, _ := strings.Cut(in.args, "=")
			args[k] = v
		default:
			st := stages[len(stages)-1]
			st.instrs = append(st.instrs, in)
		}
	}
	if len(stages) == 0 {
		return nil, nil, fmt.Errorf("no FROM")
	}
	return args, stages, nil
}

// flagValue returns the value of --name=value in instruction args.
func flagValue(args, name string) (string, bool) {
	for _, f := range strings.Fields(args) {
		if v, ok := strings.CutPrefix(f, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

var (
	goBuild   = regexp.MustCompile(`go build ([^&;]*)`)
	remoteAdd = regexp.MustCompile(`(?i)\b(https?|ftp)://|git@`)
	rootUser  = regexp.MustCompile(`^(root|0)(:|$)`)
)

// checkDockerfile checks the image recipe. repoRoot is the build context,
// to check that the packages it builds exist.
func checkDockerfile(text, repoRoot string) []error {
	_, stages, err := parseDockerfile(text)
	if err != nil {
		return []error{err}
	}
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if len(stages) < 2 {
		fail("%d stage(s): want a multi-stage build (builder + runtime)", len(stages))
	}
	byName := map[string]int{}
	built := map[string]bool{}
	cgoOff := false
	for _, st := range stages {
		if !strings.Contains(st.image, ":") || strings.HasSuffix(st.image, ":latest") {
			if _, isStage := byName[strings.ToLower(st.image)]; !isStage {
				fail("stage %d: image %q: pin a tag (not latest)", st.index, st.image)
			}
		}
		for _, in := range st.instrs {
			switch in.cmd {
			case "ADD":
				if remoteAdd.MatchString(in.args) {
					fail("line %d: ADD of a remote URL %q: download in a RUN with a checksum, or COPY", in.line, in.args)
				}
			case "COPY":
				if from, ok := flagValue(in.args, "from"); ok {
					idx, known := byName[strings.ToLower(from)]
					if n, err := strconv.Atoi(from); err == nil {
						idx, known = n, n < st.index
					}
					if !known || idx >= st.index {
						fail("line %d: COPY --from=%s: no earlier stage of that name", in.line, from)
					}
				}
			case "ENV", "RUN", "ARG":
				if regexp.MustCompile(`\bCGO_ENABLED=0\b`).MatchString(in.args) {
					cgoOff = true
				}
			}
			if in.cmd != "RUN" {
				continue
			}
			for _, m := range goBuild.FindAllStringSubmatch(in.args, -1) {
				b := m[1]
				if !strings.Contains(b, "-trimpath") || !strings.Contains(b, `-ldflags "-s -w"`) {
					fail("line %d: go build %q: want -trimpath -ldflags \"-s -w\"", in.line, b)
				}
				f := strings.Fields(b)
				pkg := f[len(f)-1]
				built[pkg] = true
				if fi, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(pkg))); err != nil || !fi.IsDir() {
					fail("line %d: go build %s: no such package directory in the build context", in.line, pkg)
				}
				if strings.HasPrefix(pkg, "./deploy/") {
					fail("line %d: go build %s: deploy/ is a module of its own, not the product's", in.line, pkg)
				}
			}
		}
		if st.name != "" {
			byName[st.name] = st.index
		}
	}
	if !strings.HasPrefix(stages[0].image, "golang:1.26") {
		fail("builder image %q, want golang:1.26", stages[0].image)
	}
	if !cgoOff {
		fail("CGO_ENABLED=0 not set: the binaries must be static")
	}
	for _, pkg := range []string{"./cmd/payout", "./cmd/psp-sandbox"} {
		if !built[pkg] {
			fail("%s is not built", pkg)
		}
	}
	// Every stage that runs something (has an ENTRYPOINT) runs as non-root.
	for _, st := range stages {
		user, entry := "", ""
		for _, in := range st.instrs {
			switch in.cmd {
			case "USER":
				user = in.args
			case "ENTRYPOINT":
				entry = in.args
			}
		}
		if entry == "" {
			continue
		}
		switch {
		case user != "" && rootUser.MatchString(user):
			fail("stage %d (%s): USER %s: run as non-root", st.index, st.name, user)
		case user == "" && !strings.HasSuffix(st.image, ":nonroot"):
			fail("stage %d (%s): no USER and image %q is not :nonroot", st.index, st.name, st.image)
		}
	}
	final := stages[len(stages)-1]
	var entry string
	copied := ""
	for _, in := range final.instrs {
		switch in.cmd {
		case "ENTRYPOINT":
			entry = in.args
		case "COPY":
			copied += " " + in.args
		}
	}
	if entry != `["/payout"]` {
		fail("final stage ENTRYPOINT %s, want [\"/payout\"]", entry)
	}
	for _, bin := range []string{"payout", "psp-sandbox"} {
		if !regexp.MustCompile(`/` + regexp.QuoteMeta(bin) + `\b`).MatchString(copied) {
			fail("final stage does not copy %s", bin)
		}
	}
	return errs
}

func TestDockerfile(t *testing.T) {
	good := readFile(t, "Dockerfile")
	requireClean(t, "Dockerfile", checkDockerfile(good, ".."))
	_, stages, err := parseDockerfile(good)
	if err != nil {
		t.Fatal(err)
	}
	if got := stages[len(stages)-1].image; got != "gcr.io/distroless/static-debian12:nonroot" {
		t.Errorf("runtime image %q, want distroless static :nonroot", got)
	}
	requireCaught(t, "", good, func(s string) []error { return checkDockerfile(s, "..") }, []mutation{
		{"cgo on", "ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false", "ENV GOFLAGS=-buildvcs=false", "CGO_ENABLED=0"},
		{"root user", "USER nonroot:nonroot", "USER root", "non-root"},
		{"root cron", "USER 65532:65532", "USER 0:0", "non-root"},
		{"remote ADD", "WORKDIR /src", "WORKDIR /src\nADD https://example.com/tool.tgz /tmp/", "remote URL"},
		{"unknown stage", "COPY --from=build /out/payout /payout", "COPY --from=bulid /out/payout /payout", "--from=bulid"},
		{"no trimpath", "go build -trimpath -ldflags \"-s -w\" -o /out/payout", "go build -o /out/payout", "-trimpath"},
		{"sandbox not built", "go build -trimpath -ldflags \"-s -w\" -o /out/psp-sandbox ./cmd/psp-sandbox && \\", "\\", "./cmd/psp-sandbox is not built"},
		{"missing package", "./cmd/healthcheck", "./cmd/healthcheck-gone", "no such package"},
		{"package of the deploy module", "./cmd/healthcheck", "./deploy/k8s", "a module of its own"},
		{"old go", "ARG GO_VERSION=1.26", "ARG GO_VERSION=1.22", "golang:1.26"},
		{"latest", "busybox:1.37-musl", "busybox:latest", "pin a tag"},
	})
	t.Run("no user, root image", func(t *testing.T) {
		bad := mutation{"", "USER nonroot:nonroot\n", "", ""}.apply(t, good)
		bad = mutation{"", "static-debian12:nonroot", "static-debian12:debug", ""}.apply(t, bad)
		requireErr(t, checkDockerfile(bad, ".."), "is not :nonroot")
	})
	t.Run("shell entrypoint", func(t *testing.T) {
		i := strings.LastIndex(good, `ENTRYPOINT ["/payout"]`)
		bad := good[:i] + `ENTRYPOINT ["/bin/sh"]` + good[i+len(`ENTRYPOINT ["/payout"]`):]
		requireErr(t, checkDockerfile(bad, ".."), "final stage ENTRYPOINT")
	})
	t.Run("single stage", func(t *testing.T) {
		requireErr(t, checkDockerfile("FROM golang:1.26\nENV CGO_ENABLED=0\nUSER 1000\nENTRYPOINT [\"/payout\"]\n", ".."), "multi-stage")
	})
}
