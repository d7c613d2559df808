package ui

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/acme/payout/internal/identity"
	"github.com/rs/zerolog"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/sync/singleflight"
)

// MinUserCost is the lowest bcrypt cost a users file may hold. htpasswd -B
// writes cost 5 unless told otherwise (-C), which a GPU guesses through
// quickly: make hashes with `htpasswd -nBC 12 NAME`.
const MinUserCost = 10

// MaxUserCost is the highest: at 14 one comparison takes about a second
// here, and every login that misses the cache pays it (a cost of 31 would
// take days, at start already, for the dummy hash).
const MaxUserCost = 14

// maxUserName bounds a login name (the audit trail records it as who
// acted, the log as who failed).
const maxUserName = 64

// ErrUsersFile is matched (errors.Is) by every UsersFileError.
var ErrUsersFile = errors.New("bad UI users file")

// UsersFileError is a users file the UI refuses to start with: Path and
// Line (0: the file as a whole) say where, Reason what is wrong. It never
// holds a hash or a password. It matches ErrUsersFile and ErrConfig, and
// Err, the cause when there is one (reading the file).
type UsersFileError struct {
	Path   string
	Line   int
	Reason string
	Err    error
}

func (e *UsersFileError) Error() string {
	where := e.Path
	if e.Line > 0 {
		where = fmt.Sprintf("%s:%d", e.Path, e.Line)
	}
	if e.Err != nil {
		return fmt.Sprintf("ui: users file %s: %s: %v", where, e.Reason, e.Err)
	}
	return fmt.Sprintf("ui: users file %s: %s", where, e.Reason)
}

// Unwrap lets errors.Is match ErrUsersFile, ErrConfig and the cause.
func (e *UsersFileError) Unwrap() []error {
	errs := []error{ErrUsersFile, ErrConfig}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// Users are the named logins of a users file (payout ui --users): one
// `name:HASH[:IDENTITY]` line per login, HASH a bcrypt hash as `htpasswd
// -B` writes it. Each person signs in with basic auth under their own
// login; IDENTITY (default: the login) is the person the UI records as who
// approved, discarded, uploaded or paused, and which four-eyes compares
// with who loaded the batch: `alice:HASH:alice@example.com` makes the
// basic-auth login alice and the single sign-on name alice@example.com
// (or alice) one person. A Users is read once and never changes: a
// changed file takes effect at the next start.
type Users struct {
	hashes map[string][]byte
	// ids maps a login, lower case, to its person's canonical identity
	// (identity.Canonical).
	ids map[string]string
	// dummy is compared with the password of a name that is not in the
	// file, so a wrong name costs what a wrong password does.
	dummy []byte
}

// Len is the number of logins.
func (u *Users) Len() int { return len(u.hashes) }

// LoadUsers reads the users file at path (see ParseUsers). A file that
// group or others may read or write is accepted with a warning on log.
func LoadUsers(path string, log zerolog.Logger) (*Users, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &UsersFileError{Path: path, Reason: "cannot read it", Err: err}
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().Perm()&0o077 != 0 {
		log.Warn().Str("file", path).Str("mode", st.Mode().Perm().String()).
			Msg("ui: the users file is open to group or others: chmod 600 it (readable by the UI's user only)")
	}
	return ParseUsers(path, f)
}

// parseUserLine reads one NAME:HASH[:IDENTITY] line of a users file: the
// login, its bcrypt hash and cost, and the canonical identity it signs in
// as (the name itself without IDENTITY). reason says what is wrong ("":
// nothing).
func parseUserLine(line string) (name, hash, canon string, cost int, reason string) {
	name, hash, ok := strings.Cut(line, ":")
	if !ok {
		return "", "", "", 0, "no ':' on the line: want NAME:HASH, as `payout passwd NAME` (or `htpasswd -nBC 12 NAME`) writes it"
	}
	if err := checkUserName(name); err != "" {
		return "", "", "", 0, err
	}
	hash, id, hasID := strings.Cut(hash, ":")
	if !hasID {
		id = name
	}
	canon, err := identity.Canonical(id)
	if err != nil {
		return "", "", "", 0, fmt.Sprintf("user %q: the identity after the second ':': %v", name, err)
	}
	cost, err = bcryptCost(hash)
	if err != nil {
		return "", "", "", 0, fmt.Sprintf("user %q: the hash is not bcrypt: only bcrypt ($2y$, $2a$, $2b$) is accepted, make one with `payout passwd %s`", name, name)
	}
	if cost < MinUserCost || cost > MaxUserCost {
		return "", "", "", 0, fmt.Sprintf("user %q: bcrypt cost %d is outside %d to %d: make a new hash with `payout passwd %s`", name, cost, MinUserCost, MaxUserCost, name)
	}
	return name, hash, canon, cost, ""
}

// ParseUsers reads a users file from r; path names it in errors. Blank
// lines and lines starting with '#' are skipped. It refuses a line without
// ':', an empty name, a name with other characters than letters, digits,
// '.', '_', '-' and '@' or longer than 64 bytes, a reserved name (ui-...,
// the names of the token and local modes), a hash that is not bcrypt
// ($2a$, $2b$ or $2y$), a cost outside MinUserCost to MaxUserCost or unlike the
// first line's, a name given twice (ignoring case), and
// a file without users.
func ParseUsers(path string, r io.Reader) (*Users, error) {
	u := &Users{hashes: map[string][]byte{}, ids: map[string]string{}}
	lineOf := map[string]int{}
	costLine, fileCost := 0, 0
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimRight(sc.Text(), " \t\r")
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		fail := func(format string, a ...any) error {
			return &UsersFileError{Path: path, Line: n, Reason: fmt.Sprintf(format, a...)}
		}
		name, hash, canon, cost, reason := parseUserLine(line)
		if reason != "" {
			return nil, fail("%s", reason)
		}
		if first, dup := lineOf[strings.ToLower(name)]; dup {
			return nil, fail("user %q is also on line %d (names are compared ignoring case, as four-eyes does): one line per user", name, first)
		}
		// One cost for all: a name not in the file is compared with a
		// dummy hash of that cost, so the time of a failed login tells
		// nothing of which names exist.
		if costLine > 0 && cost != fileCost {
			return nil, fail("user %q: bcrypt cost %d, but line %d has %d: give every user the same cost (`htpasswd -nBC %d NAME`)", name, cost, costLine, fileCost, fileCost)
		}
		if costLine == 0 {
			costLine, fileCost = n, cost
		}
		lineOf[strings.ToLower(name)] = n
		u.hashes[name] = []byte(hash)
		u.ids[strings.ToLower(name)] = canon
	}
	if err := sc.Err(); err != nil {
		return nil, &UsersFileError{Path: path, Line: n + 1, Reason: "cannot read the line", Err: err}
	}
	if len(u.hashes) == 0 {
		return nil, &UsersFileError{Path: path, Reason: "no users: want one NAME:HASH line per person (`htpasswd -nBC 12 NAME >> FILE`)"}
	}
	if err := u.checkIdentities(path, lineOf); err != nil {
		return nil, err
	}
	u.dummy = dummyHash(fileCost)
	return u, nil
}

// checkIdentities refuses an identity that is another login's name but
// not that login's identity: a single sign-on name would then be two
// people.
func (u *Users) checkIdentities(path string, lineOf map[string]int) error {
	for login, id := range u.ids {
		if other, ok := u.ids[id]; ok && other != id {
			return &UsersFileError{Path: path, Line: lineOf[login], Reason: fmt.Sprintf(
				"user %q: identity %q is the login on line %d, whose identity is %q: one name, one person", login, id, lineOf[id], other)}
		}
	}
	return nil
}

// Identity is the person a name signs in as: the identity of the login of
// that name (ignoring case), else the name's canonical form; "" for a name
// identity.Canonical refuses. Basic-auth logins and single sign-on names
// go through it, so both name one person.
func (u *Users) Identity(name string) string {
	c, err := identity.Canonical(name)
	if err != nil {
		return ""
	}
	if u != nil {
		if id, ok := u.ids[strings.ToLower(c)]; ok {
			return id
		}
	}
	return c
}

// checkUserName says what is wrong with a login name ("" if nothing).
func checkUserName(name string) string {
	if name == "" {
		return "empty user name before ':'"
	}
	if len(name) > maxUserName {
		return fmt.Sprintf("user name longer than %d bytes", maxUserName)
	}
	for _, c := range name {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._-@", c)
		if !ok {
			return fmt.Sprintf("user name %q has a character other than letters, digits, '.', '_', '-' and '@'", logUser(name))
		}
	}
	if strings.HasPrefix(strings.ToLower(name), "ui-") {
		return fmt.Sprintf("user name %q is reserved: names starting with ui- name the token (%s) and local (%s) modes", name, tokenUser, localUser)
	}
	return ""
}

// errNotBcrypt: a hash not in one of the bcrypt forms accepted.
var errNotBcrypt = errors.New("not a bcrypt hash")

// bcryptHashLen is the length of a bcrypt hash: "$2y$", two digits of
// cost, "$", 22 characters of salt and 31 of hash.
const bcryptHashLen = 60

// bcryptCost is the cost of a bcrypt hash in one of the forms htpasswd
// and the usual libraries write.
func bcryptCost(hash string) (int, error) {
	if len(hash) != bcryptHashLen ||
		!strings.HasPrefix(hash, "$2a$") && !strings.HasPrefix(hash, "$2b$") && !strings.HasPrefix(hash, "$2y$") {
		return 0, errNotBcrypt
	}
	// "$2y$NN$" then 53 characters of bcrypt's base64: a hash that is
	// not would load and then fail every login without a word.
	for _, c := range hash[7:] {
		if !strings.ContainsRune(bcryptAlphabet, c) {
			return 0, errNotBcrypt
		}
	}
	if hash[6] != '$' {
		return 0, errNotBcrypt
	}
	return bcrypt.Cost([]byte(hash))
}

// bcryptAlphabet is the base64 alphabet of bcrypt's salt and hash.
const bcryptAlphabet = "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// dummyHashes are the bcrypt hashes of random passwords, one per cost,
// made once per process (a hash at cost 12 takes a quarter of a second).
var dummyHashes sync.Map // int -> []byte

func dummyHash(cost int) []byte {
	if h, ok := dummyHashes.Load(cost); ok {
		return h.([]byte)
	}
	pw := make([]byte, 32)
	_, _ = rand.Read(pw)
	h, err := bcrypt.GenerateFromPassword(pw, cost)
	if err != nil { // only for a cost above bcrypt.MaxCost, refused by bcrypt.Cost
		panic(err)
	}
	actual, _ := dummyHashes.LoadOrStore(cost, h)
	return actual.([]byte)
}

// loginTTL is how long a verified name and password are taken without
// running bcrypt again. bcrypt at cost 10 and above takes tens of
// milliseconds (by design) and asynqmon polls its API every few seconds
// with the same credentials: without the cache every poll would pay it.
// The users file is read at start only, so the TTL is not what applies a
// changed password (a restart does); it bounds how long a sign-in is
// remembered in memory.
const loginTTL = 5 * time.Minute

// maxCachedLogins bounds the cache; it holds one entry per name that
// signed in successfully, so a spray of guesses never grows it.
const maxCachedLogins = 1024

// loginCache remembers successful verifications: per name, the HMAC-SHA256
// under a key drawn at start of name, 0x00 and the password, and until
// when it holds. A hit is compared in constant time; neither the password
// nor anything that could be guessed offline without the key is kept.
type loginCache struct {
	key []byte
	max int
	now func() time.Time

	mu sync.Mutex
	m  map[string]cachedLogin
}

type cachedLogin struct {
	mac   [sha256.Size]byte
	until time.Time
}

func newLoginCache(size int, now func() time.Time) *loginCache {
	k := make([]byte, 32)
	_, _ = rand.Read(k) // crypto/rand.Read never fails (Go 1.24+)
	return &loginCache{key: k, max: size, now: now, m: map[string]cachedLogin{}}
}

func (c *loginCache) mac(name, password string) [sha256.Size]byte {
	// The name's length first: basic auth allows NUL in both parts, so a
	// separator alone would let ("a", "b\x00c") and ("a\x00b", "c") share
	// a MAC.
	m := hmac.New(sha256.New, c.key)
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(name)))
	m.Write(n[:])
	m.Write([]byte(name))
	m.Write([]byte(password))
	var out [sha256.Size]byte
	copy(out[:], m.Sum(nil))
	return out
}

// hit reports whether name signed in with the password of mac within
// loginTTL.
func (c *loginCache) hit(name string, mac [sha256.Size]byte) bool {
	c.mu.Lock()
	e, ok := c.m[name]
	c.mu.Unlock()
	return ok && hmac.Equal(e.mac[:], mac[:]) && c.now().Before(e.until)
}

// put remembers a successful sign-in. When full it drops the expired
// entries, else any one.
func (c *loginCache) put(name string, mac [sha256.Size]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if _, ok := c.m[name]; !ok && len(c.m) >= c.max {
		for k, e := range c.m {
			if !now.Before(e.until) {
				delete(c.m, k)
			}
		}
		for k := range c.m {
			if len(c.m) < c.max {
				break
			}
			delete(c.m, k)
		}
	}
	c.m[name] = cachedLogin{mac: mac, until: now.Add(loginTTL)}
}

func (c *loginCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// userLogins checks basic-auth names and passwords against Users.
type userLogins struct {
	users *Users
	cache *loginCache
	// compare is bcrypt.CompareHashAndPassword (counted in tests).
	compare func(hash, password []byte) error
	// slots bounds the bcrypt comparisons running at once in the process
	// (one per CPU): a flood of guesses from many addresses queues here
	// instead of taking every CPU from the UI and the rest of the host.
	slots chan struct{}
	// flight makes the requests of one client that carry the same
	// credentials at once (a browser loading a page) share one
	// comparison and one attempt of the limiter.
	flight singleflight.Group
}

func newUserLogins(users *Users, now func() time.Time) *userLogins {
	return &userLogins{users: users, cache: newLoginCache(maxCachedLogins, now),
		compare: bcrypt.CompareHashAndPassword, slots: make(chan struct{}, runtime.GOMAXPROCS(0))}
}

// attempt checks name and password of a client whose failure limit is
// key in lim. A login remembered in the
// cache passes at once. Otherwise the attempt is first reserved with the
// limiter (refused, without comparing, when the IP's failures and attempts
// in flight reach its limit), then compared with bcrypt, then counted: so
// guesses sent in parallel cannot all pass the limiter's check before the
// first of them fails. A name not in the file still costs one bcrypt
// comparison, with a dummy hash of the file's cost (one cost for every
// line, ParseUsers), so the time taken does not tell which names exist.
func (l *userLogins) attempt(key, name, password string, lim *failureLimiter) authOutcome {
	out := authOutcome{scheme: "basic", user: name}
	if _, known := l.users.hashes[name]; known {
		out.logName = name
	}
	mac := l.cache.mac(name, password)
	if l.cache.hit(name, mac) {
		out.res = authOK
		return out
	}
	leader := false
	v, _, _ := l.flight.Do(key+"\x00"+string(mac[:]), func() (r any, _ error) {
		leader = true
		ok, left, atOnce := lim.begin(key)
		if !ok {
			return authOutcome{res: authBad, user: name, limited: left, atOnce: atOnce}, nil
		}
		good := false
		// A panic in the comparison still ends the attempt, as a failure:
		// an attempt left in flight would hold the IP's limit for good.
		defer func() {
			n, lockedNow := lim.end(key, !good)
			if !good {
				r = authOutcome{res: authBad, user: name, failures: n, lockedNow: lockedNow}
			}
		}()
		good = l.verify(name, password)
		if good {
			l.cache.put(name, mac)
			return authOutcome{res: authOK, user: name}, nil
		}
		return nil, nil // set by the deferred end
	})
	r := v.(authOutcome)
	// Only the same name shares a result (the MAC keeps names apart; this
	// keeps them apart even if it did not).
	if r.user != name {
		return authOutcome{res: authBad, scheme: "basic", user: name, logName: out.logName, limited: time.Second, atOnce: true}
	}
	out.res, out.limited, out.atOnce, out.failures, out.counted = r.res, r.limited, r.atOnce, r.failures, true
	// The lockout is reported once, by the request that caused it.
	out.lockedNow = r.lockedNow && leader
	return out
}

// verify compares password with name's hash (the dummy hash for a name not
// in the file), one of at most GOMAXPROCS comparisons at once.
func (l *userLogins) verify(name, password string) bool {
	hash, known := l.users.hashes[name]
	if !known {
		hash = l.users.dummy
	}
	l.slots <- struct{}{}
	defer func() { <-l.slots }()
	return l.compare(hash, []byte(password)) == nil && known
}
