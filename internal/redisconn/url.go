package redisconn

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Query parameters whose values are secrets.
var secretParams = []string{"password", "sentinel_password"}

const redactedMark = "xxxxx"

// Redacted returns rawURL with the password of its user info and the values
// of password-like query parameters replaced by "xxxxx". It works on
// malformed URLs too, erring on the side of hiding too much: everything
// between "scheme://user:" and the last '@' is hidden.
func Redacted(rawURL string) string {
	prefix, rest := "", rawURL
	if i := strings.Index(rawURL, "://"); i >= 0 {
		prefix, rest = rawURL[:i+3], rawURL[i+3:]
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		userinfo := rest[:at]
		if user, _, ok := strings.Cut(userinfo, ":"); ok && validUserinfo(user) {
			userinfo = user + ":" + redactedMark
		} else if ok || !validUserinfo(userinfo) {
			userinfo = redactedMark
		}
		// A lone user name (no ':') is not a secret and stays.
		rest = userinfo + rest[at:]
	}
	if q := strings.IndexAny(rest, "?"); q >= 0 {
		head, query := rest[:q+1], rest[q+1:]
		frag := ""
		if h := strings.Index(query, "#"); h >= 0 {
			query, frag = query[:h], query[h:]
		}
		parts := strings.Split(query, "&")
		for i, p := range parts {
			name, _, hasValue := strings.Cut(p, "=")
			if hasValue && isSecretParam(name) {
				parts[i] = name + "=" + redactedMark
			}
		}
		rest = head + strings.Join(parts, "&") + frag
	}
	return prefix + rest
}

func isSecretParam(name string) bool {
	if n, err := url.QueryUnescape(name); err == nil {
		name = n
	}
	name = strings.ToLower(name)
	for _, s := range secretParams {
		if name == s {
			return true
		}
	}
	return false
}

// secrets returns every form in which a secret of rawURL could appear in a
// message: raw and decoded password, and secret query values.
func secrets(rawURL string) []string {
	var out []string
	add := func(s string) {
		if s != "" && s != redactedMark {
			out = append(out, s)
			if d, err := url.PathUnescape(s); err == nil && d != s {
				out = append(out, d)
			}
			if d, err := url.QueryUnescape(s); err == nil && d != s {
				out = append(out, d)
			}
		}
	}
	rest := rawURL
	if i := strings.Index(rawURL, "://"); i >= 0 {
		rest = rawURL[i+3:]
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		if _, pw, ok := strings.Cut(rest[:at], ":"); ok {
			add(pw)
		} else if !validUserinfo(rest[:at]) {
			add(rest[:at])
		}
		rest = rest[at+1:]
	}
	if _, query, ok := strings.Cut(rest, "?"); ok {
		for p := range strings.SplitSeq(query, "&") {
			if name, v, ok := strings.Cut(p, "="); ok && isSecretParam(name) {
				add(v)
			}
		}
	}
	return out
}

// scrub removes rawURL and its secrets from a message, longest first, each
// once (a secret that is part of "xxxxx" cannot loop).
func scrub(msg, rawURL string) string {
	msg = strings.ReplaceAll(msg, rawURL, Redacted(rawURL))
	ss := secrets(rawURL)
	slices.SortFunc(ss, func(a, b string) int { return len(b) - len(a) })
	for _, s := range ss {
		msg = strings.ReplaceAll(msg, s, redactedMark)
	}
	return msg
}

// validUserinfo reports whether s is made only of the characters RFC 3986
// allows unescaped in user info, with well-formed %XX escapes.
func validUserinfo(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("-._~!$&'()*+,;=:", c) >= 0:
		case c == '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return false
			}
			i += 2
		default:
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// parts of a URL, split by hand so that host lists are allowed.
type parts struct {
	scheme   string
	user     string
	password string
	hasUser  bool
	hosts    []string
	path     string // without the leading '/', unescaped
	query    url.Values
}

func split(raw string) (*parts, string) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, "missing scheme (want redis://, rediss://, redis-sentinel:// or redis-cluster://)"
	}
	p := &parts{scheme: strings.ToLower(scheme)}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		userinfo := rest[:at]
		rest = rest[at+1:]
		if !validUserinfo(userinfo) {
			return nil, "user or password has characters that must be percent-encoded (for example / ? # @ space)"
		}
		u, pw, hasPW := strings.Cut(userinfo, ":")
		var err1, err2 error
		p.user, err1 = url.PathUnescape(u)
		p.password, err2 = url.PathUnescape(pw)
		if err1 != nil || err2 != nil {
			return nil, "user or password is badly percent-encoded"
		}
		if !hasPW {
			p.password = ""
		}
		p.hasUser = true
	}
	if strings.Contains(rest, "#") {
		return nil, "a fragment (#...) is not allowed"
	}
	hostEnd := strings.IndexAny(rest, "/?")
	if hostEnd < 0 {
		hostEnd = len(rest)
	}
	hostList := rest[:hostEnd]
	rest = rest[hostEnd:]
	if hostList != "" {
		p.hosts = strings.Split(hostList, ",")
	}
	rawPath, rawQuery, _ := strings.Cut(rest, "?")
	rawPath = strings.TrimPrefix(rawPath, "/")
	path, err := url.PathUnescape(rawPath)
	if err != nil {
		return nil, "path is badly percent-encoded"
	}
	p.path = path
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, "query string is badly encoded"
	}
	p.query = q
	return p, ""
}

// hostPort checks one "host[:port]" entry and adds the default port.
func hostPort(h, defPort string) (string, string) {
	var host, port string
	switch {
	case h == "":
		return "", "empty host in host list"
	case strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]"):
		host, port = h[1:len(h)-1], defPort
	case !strings.Contains(h, ":"):
		host, port = h, defPort
	default:
		var err error
		if host, port, err = net.SplitHostPort(h); err != nil {
			return "", fmt.Sprintf("bad host:port %q", h)
		}
	}
	if host == "" {
		return "", fmt.Sprintf("empty host in %q", h)
	}
	for _, c := range host {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune(".-_:%", c)) {
			return "", fmt.Sprintf("bad host %q", host)
		}
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Sprintf("bad port %q", port)
	}
	return net.JoinHostPort(host, port), ""
}

// hostPorts checks every "host[:port]" entry of hosts and adds the default
// port; the message names the first bad one.
func hostPorts(hosts []string, defPort string) ([]string, string) {
	addrs := make([]string, 0, len(hosts))
	for _, h := range hosts {
		addr, msg := hostPort(h, defPort)
		if msg != "" {
			return nil, msg
		}
		addrs = append(addrs, addr)
	}
	return addrs, ""
}

// parseURL parses the URL part of the options (no file access).
func parseURL(raw string) (*Config, error) {
	bad := func(msg string) error { return newError(ErrBadURL, raw, msg, nil) }
	p, msg := split(raw)
	if msg != "" {
		return nil, bad(msg)
	}
	cfg := &Config{URL: Redacted(raw)}
	switch p.scheme {
	case "redis", "rediss":
		if len(p.hosts) > 1 {
			return nil, bad("several hosts: use redis-sentinel:// or redis-cluster://")
		}
		if p.query.Has("skip_verify") {
			return nil, bad("skip_verify is not accepted in the URL; use the insecure-skip-verify option (tests only)")
		}
		o, err := redis.ParseURL(raw)
		if err != nil {
			// The message may quote the URL: scrub it, and do not wrap it.
			return nil, bad(err.Error())
		}
		if o.TLSConfig != nil {
			o.TLSConfig = &tls.Config{ServerName: o.TLSConfig.ServerName, MinVersion: tls.VersionTLS12}
		}
		cfg.Kind, cfg.Single = KindSingle, o
	case "redis-sentinel", "rediss-sentinel":
		o, msg := parseSentinel(p)
		if msg != "" {
			return nil, bad(msg)
		}
		cfg.Kind, cfg.Failover = KindSentinel, o
	case "redis-cluster", "rediss-cluster":
		o, msg := parseCluster(p)
		if msg != "" {
			return nil, bad(msg)
		}
		cfg.Kind, cfg.Cluster = KindCluster, o
	default:
		s := "unknown scheme"
		if isToken(p.scheme) {
			s += " " + strconv.Quote(p.scheme)
		}
		return nil, bad(s + " (want redis, rediss, redis-sentinel, rediss-sentinel, redis-cluster or rediss-cluster)")
	}
	return cfg, nil
}

func isToken(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.') {
			return false
		}
	}
	return true
}

// common holds the query options shared by the sentinel and cluster forms.
type common struct {
	dial, read, write time.Duration
	clientName        string
}

// takeCommon removes the shared options from q.
func takeCommon(q url.Values) (common, string) {
	var c common
	for name, dst := range map[string]*time.Duration{"dial_timeout": &c.dial, "read_timeout": &c.read, "write_timeout": &c.write} {
		if !q.Has(name) {
			continue
		}
		v := q.Get(name)
		q.Del(name)
		d, err := parseDuration(v)
		if err != nil {
			return c, fmt.Sprintf("%s: bad duration %q", name, v)
		}
		*dst = d
	}
	c.clientName = q.Get("client_name")
	q.Del("client_name")
	return c, ""
}

// parseDuration accepts a Go duration or a plain number of seconds, as
// redis.ParseURL does.
func parseDuration(v string) (time.Duration, error) {
	if n, err := strconv.Atoi(v); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	return time.ParseDuration(v)
}

func unknownParams(q url.Values) string {
	if len(q) == 0 {
		return ""
	}
	var names []string
	for n := range q {
		if isParamName(n) {
			names = append(names, strconv.Quote(n))
		} else {
			names = append(names, "(unprintable name)")
		}
	}
	slices.Sort(names)
	return "unknown option(s): " + strings.Join(names, ", ")
}

func isParamName(s string) bool {
	if s == "" || len(s) > 40 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

func parseSentinel(p *parts) (*redis.FailoverOptions, string) {
	if len(p.hosts) == 0 {
		return nil, "no sentinel address"
	}
	addrs, msg := hostPorts(p.hosts, "26379")
	if msg != "" {
		return nil, msg
	}
	o := &redis.FailoverOptions{Username: p.user, Password: p.password, SentinelAddrs: addrs}
	if p.path == "" || strings.Contains(p.path, "/") {
		return nil, "master name missing: want redis-sentinel://host:26379/mastername"
	}
	o.MasterName = p.path
	q := p.query
	c, msg := takeCommon(q)
	if msg != "" {
		return nil, msg
	}
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.ClientName = c.dial, c.read, c.write, c.clientName
	if q.Has("db") {
		n, err := strconv.Atoi(q.Get("db"))
		if err != nil || n < 0 {
			return nil, fmt.Sprintf("bad db %q", q.Get("db"))
		}
		o.DB = n
		q.Del("db")
	}
	o.SentinelUsername = q.Get("sentinel_username")
	o.SentinelPassword = q.Get("sentinel_password")
	q.Del("sentinel_username")
	q.Del("sentinel_password")
	if msg := unknownParams(q); msg != "" {
		return nil, msg
	}
	if p.scheme == "rediss-sentinel" {
		// ServerName stays empty: Go takes it from each address dialled.
		o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return o, ""
}

func parseCluster(p *parts) (*redis.ClusterOptions, string) {
	if len(p.hosts) == 0 {
		return nil, "no cluster node address"
	}
	addrs, msg := hostPorts(p.hosts, "6379")
	if msg != "" {
		return nil, msg
	}
	o := &redis.ClusterOptions{Username: p.user, Password: p.password, Addrs: addrs}
	if p.path != "" && p.path != "0" {
		return nil, "a cluster has only database 0: drop the path"
	}
	q := p.query
	c, msg := takeCommon(q)
	if msg != "" {
		return nil, msg
	}
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.ClientName = c.dial, c.read, c.write, c.clientName
	if msg := unknownParams(q); msg != "" {
		return nil, msg
	}
	if p.scheme == "rediss-cluster" {
		o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return o, ""
}
