package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/operator"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/sandbox"
	"github.com/acme/payout/internal/ui"
	"github.com/acme/payout/internal/vault"
)

func runKeygen(_ context.Context, e *env, args []string) error {
	fs := newFlags(e, "keygen", "")
	if err := parse(e, fs, args); err != nil {
		return err
	}
	k, err := vault.GenerateKey()
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, k)
	return nil
}

func runSandbox(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "sandbox", "[flags]")
	var (
		lf   logFlags
		addr string
	)
	lf.register(fs)
	cfg := sandbox.RegisterFlags(fs)
	fs.StringVar(&addr, "addr", "127.0.0.1:8090", "listen address (keep it on loopback: the admin API has no auth)")
	if err := parse(e, fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	log, err := lf.logger(e)
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return usageErr("%v", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return usageErr("--addr %s: %v", addr, err)
	}
	log.Info().Str("addr", ln.Addr().String()).Msg("PSP simulator listening")
	return sandbox.New(*cfg, log).Serve(ctx, ln)
}

// uiFlags are the flags of payout ui besides logging, Redis and the
// actions' (uiControlFlags).
type uiFlags struct {
	addr, prometheus, users, proxies, proxyUser string
	proxyGroups                                 string
	readOnly, insecure                          bool
	roles                                       rolesFlags
}

func (u *uiFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&u.addr, "addr", ui.DefaultAddr, "listen address of the web UI")
	fs.BoolVar(&u.readOnly, "read-only", false, "view only: no pause, retry, delete or archive, no Approve, Discard or upload from the UI")
	fs.BoolVar(&u.insecure, "insecure-local", false, "allow running without credentials (loopback addresses only)")
	fs.StringVar(&u.users, "users", "", "file of named logins, one NAME:HASH line per person, HASH bcrypt of one cost from 10 to 14 (payout passwd NAME); "+
		"read at start: restart to apply a change; not with PAYOUT_UI_USER/PAYOUT_UI_PASSWORD")
	fs.StringVar(&u.proxies, "trusted-proxies", "", "reverse proxies in front of the UI whose X-Forwarded-For (which they must append to) gives the client address for the failed-login lockout and the logs: addresses or CIDR prefixes, comma-separated, not 0.0.0.0/0 (empty: none; every client behind a proxy then shares its lockout)")
	fs.StringVar(&u.proxyUser, "proxy-user-header", "", "single sign-on: the header in which an authenticating reverse proxy of --trusted-proxies names the signed-in person, recorded in the audit (oauth2-proxy: X-Forwarded-User with --pass-user-headers, X-Auth-Request-User with --set-xauthrequest); believed from the trusted proxies only")
	fs.StringVar(&u.proxyGroups, "proxy-groups-header", ui.DefaultGroupsHeader, "single sign-on: the header in which that proxy lists the signed-in person's groups, comma-separated, mapped to roles by the \"group NAME: roles\" lines of --roles-file (oauth2-proxy: X-Forwarded-Groups with --pass-user-headers, X-Auth-Request-Groups with --set-xauthrequest); read only with --proxy-user-header, from the trusted proxies")
	u.roles.register(fs)
	fs.StringVar(&u.prometheus, "prometheus-addr", "", "Prometheus server the UI queries for queue graphs, e.g. http://127.0.0.1:9090")
}

func runUI(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "ui", "[flags]")
	var (
		lf logFlags
		rf redisFlags
		uf uiFlags
		cf uiControlFlags
	)
	lf.register(fs)
	rf.register(fs)
	cf.register(fs)
	uf.register(fs)
	if err := parse(e, fs, args); err != nil {
		return err
	}
	log, err := lf.logger(e)
	if err != nil {
		return err
	}
	cfg, err := uiConfig(e, uf.addr, uf.readOnly, uf.insecure, uf.prometheus, uf.users, log)
	if err != nil {
		return configErr(err)
	}
	cfg.FourEyes = cf.fourEyes
	cfg.ProxyUserHeader, cfg.ProxyGroupsHeader = uf.proxyUser, uf.proxyGroups
	if cfg.Roles, err = uf.roles.load(); err != nil {
		return err
	}
	if cfg.Roles == nil {
		log.Warn().Msg("ui: no --roles-file: everyone signed in may upload, approve, discard, cancel, resolve and pause (every role but admin); see docs/controls.md, \"Roles\"")
	} else {
		log.Info().Str("file", uf.roles.file).Msg("ui: roles read")
	}
	if cfg.TrustedProxies, err = ui.ParseTrustedProxies(uf.proxies); err != nil {
		return configErr(err)
	}
	// Credentials, address and the actions' flags first, before any
	// connection is made.
	if err := ui.CheckConfig(cfg); err != nil && !errors.Is(err, ui.ErrNoRedis) {
		return configErr(err)
	}
	var actions preparedUI
	if !uf.readOnly {
		if actions, err = cf.prepare(e); err != nil {
			return err
		}
	}
	rdb, err := rf.open(ctx, e)
	if err != nil {
		return err
	}
	defer rdb.Close()
	cfg.Redis = rdb
	if err := ui.CheckConfig(cfg); err != nil {
		return configErr(err)
	}
	cfg.Batches = operator.Batches{Ledger: ledger.New(rdb), Queue: rdb}
	console := operator.NewConsole(rdb)
	console.Queue = rdb
	cfg.Console = console
	if !uf.readOnly {
		cf.configure(actions, &cfg, rdb, log)
	}
	cfg.Registry.MustRegister(queue.New(rdb).Collector())
	return ui.Serve(ctx, cfg)
}
