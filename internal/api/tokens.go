package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/ledger/keys"
	"github.com/redis/go-redis/v9"
)

// TokenPrefix begins every API token, so that a token pasted where it
// should not be (a chat, a repository) is recognised by secret scanners.
const TokenPrefix = "pyt_"

// PrincipalPrefix begins the acting identity of a token in the audit
// trail: "token:NAME".
const PrincipalPrefix = "token:"

// Errors of the token store.
var (
	ErrTokenName    = errors.New("a token name is 1-40 lowercase letters, digits, '-' or '_', starting with a letter")
	ErrTokenExists  = errors.New("a token of that name exists (revoke it first)")
	ErrTokenUnknown = errors.New("no such token")
	ErrTokenRole    = errors.New("a token holds viewer, maker, approver or operator (admin administers; it is never a token's)")
)

// Token is one API token as stored: never the token itself, only its
// SHA-256, its name and role.
type Token struct {
	Name      string      `json:"name"`
	Role      access.Role `json:"role"`
	CreatedAt time.Time   `json:"createdAt"`
	CreatedBy string      `json:"createdBy"`
}

// Principal is who a token acts as: "token:NAME" in its role.
func (t Token) Principal() access.Principal {
	return access.Principal{Name: PrincipalPrefix + t.Name, Roles: access.Of(t.Role)}
}

// Tokens is the store of API tokens in Redis.
type Tokens struct{ rdb redis.UniversalClient }

// NewTokens returns the token store of rdb.
func NewTokens(rdb redis.UniversalClient) Tokens { return Tokens{rdb: rdb} }

var tokenName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,39}$`)

// digest is the stored form of a token: SHA-256, hex. A token has 256
// random bits, so a plain hash (no salt, no stretching) is enough: it
// cannot be guessed, only stolen, and the store does not hold it.
func digest(token string) string {
	s := sha256.Sum256([]byte(token))
	return hex.EncodeToString(s[:])
}

// newSecret is a fresh token: the prefix and 32 random bytes in base32.
func newSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return TokenPrefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b)), nil
}

// Create makes a token name with role, created by by; it returns the
// token, which is shown once and never stored.
func (s Tokens) Create(ctx context.Context, name string, role access.Role, by string) (string, Token, error) {
	t := Token{Name: name, Role: role, CreatedAt: time.Now().UTC().Truncate(time.Second), CreatedBy: by}
	if !tokenName.MatchString(name) {
		return "", t, ErrTokenName
	}
	if role == access.Admin || access.Of(role) == 0 {
		return "", t, ErrTokenRole
	}
	secret, err := newSecret()
	if err != nil {
		return "", t, err
	}
	sum := digest(secret)
	ok, err := s.rdb.HSetNX(ctx, keys.APITokens(), name, sum).Result()
	if err != nil {
		return "", t, fmt.Errorf("create token %s: %w", name, err)
	}
	if !ok {
		return "", t, ErrTokenExists
	}
	err = s.rdb.HSet(ctx, keys.APIToken(sum), "name", name, "role", string(role),
		"created", t.CreatedAt.Format(time.RFC3339), "by", by).Err()
	if err != nil {
		s.rdb.HDel(ctx, keys.APITokens(), name)
		return "", t, fmt.Errorf("create token %s: %w", name, err)
	}
	return secret, t, nil
}

// Revoke deletes token name: requests with it are refused from now on.
func (s Tokens) Revoke(ctx context.Context, name string) error {
	sum, err := s.rdb.HGet(ctx, keys.APITokens(), name).Result()
	if errors.Is(err, redis.Nil) {
		return ErrTokenUnknown
	}
	if err != nil {
		return fmt.Errorf("revoke token %s: %w", name, err)
	}
	if err := s.rdb.Del(ctx, keys.APIToken(sum)).Err(); err != nil {
		return fmt.Errorf("revoke token %s: %w", name, err)
	}
	return s.rdb.HDel(ctx, keys.APITokens(), name).Err()
}

// List returns every token, by name.
func (s Tokens) List(ctx context.Context) ([]Token, error) {
	m, err := s.rdb.HGetAll(ctx, keys.APITokens()).Result()
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	out := make([]Token, 0, len(m))
	for _, sum := range m {
		t, err := s.bySum(ctx, sum)
		if errors.Is(err, ErrTokenUnknown) {
			continue // revoked meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Lookup returns the token secret stands for (ErrTokenUnknown for none).
func (s Tokens) Lookup(ctx context.Context, secret string) (Token, error) {
	if !strings.HasPrefix(secret, TokenPrefix) || len(secret) > 200 {
		return Token{}, ErrTokenUnknown
	}
	return s.bySum(ctx, digest(secret))
}

func (s Tokens) bySum(ctx context.Context, sum string) (Token, error) {
	m, err := s.rdb.HGetAll(ctx, keys.APIToken(sum)).Result()
	if err != nil {
		return Token{}, fmt.Errorf("token: %w", err)
	}
	if m["name"] == "" {
		return Token{}, ErrTokenUnknown
	}
	at, _ := time.Parse(time.RFC3339, m["created"])
	return Token{Name: m["name"], Role: access.Role(m["role"]), CreatedAt: at, CreatedBy: m["by"]}, nil
}
