package chaos

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/acme/payout/internal/card"
)

// Scanner looks for secrets in text: full card numbers, also written
// grouped with spaces or dashes or run into other digits, and other secrets
// (bearer tokens, passwords) as exact strings.
type Scanner struct {
	cards   map[string]bool
	lengths []int
	secrets []secret
}

type secret struct{ label, value string }

// Leak is one secret found in one line.
type Leak struct {
	Where string // file, relative to the scanned tree
	Line  int
	What  string // the secret's label, or the masked card number
}

func (l Leak) String() string { return fmt.Sprintf("%s:%d: %s", l.Where, l.Line, l.What) }

// NewScanner looks for the given card numbers (digits) and secrets (label
// to value; empty values are ignored).
func NewScanner(cards []string, secrets map[string]string) *Scanner {
	s := &Scanner{cards: map[string]bool{}}
	lens := map[int]bool{}
	for _, c := range cards {
		if c == "" {
			continue
		}
		s.cards[c] = true
		lens[len(c)] = true
	}
	for n := range lens {
		s.lengths = append(s.lengths, n)
	}
	sort.Ints(s.lengths)
	for label, v := range secrets {
		if v != "" {
			s.secrets = append(s.secrets, secret{label, v})
		}
	}
	sort.Slice(s.secrets, func(i, j int) bool { return s.secrets[i].label < s.secrets[j].label })
	return s
}

// Scan returns the leaks in data, one per secret per line.
func (s *Scanner) Scan(where string, data []byte) []Leak {
	var out []Leak
	for n, line := 1, data; len(line) > 0; n++ {
		var rest []byte
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line, rest = line[:i], line[i+1:]
		}
		for _, sec := range s.secrets {
			if bytes.Contains(line, []byte(sec.value)) {
				out = append(out, Leak{where, n, sec.label})
			}
		}
		seen := map[string]bool{}
		s.cardsIn(line, func(c string) {
			if !seen[c] {
				seen[c] = true
				out = append(out, Leak{where, n, "card " + card.Mask(c)})
			}
		})
		line = rest
	}
	return out
}

// cardsIn calls fn for every known card number inside a run of digits of
// line; single spaces or dashes between digits do not end a run.
func (s *Scanner) cardsIn(line []byte, fn func(string)) {
	if len(s.lengths) == 0 {
		return
	}
	shortest := s.lengths[0]
	run := make([]byte, 0, 32)
	flush := func() {
		if len(run) >= shortest {
			for _, n := range s.lengths {
				for i := 0; i+n <= len(run); i++ {
					if s.cards[string(run[i:i+n])] {
						fn(string(run[i : i+n]))
					}
				}
			}
		}
		run = run[:0]
	}
	isDigit := func(i int) bool { return i >= 0 && i < len(line) && line[i] >= '0' && line[i] <= '9' }
	for i, c := range line {
		switch {
		case isDigit(i):
			run = append(run, c)
		case (c == ' ' || c == '-') && isDigit(i-1) && isDigit(i+1):
			// a separator inside a grouped number
		default:
			flush()
		}
	}
	flush()
}

// ScanTree scans every regular file under root for which skip (given the
// slash-separated path relative to root) is false; skip also prunes
// directories. It returns the leaks and how many files it read.
func (s *Scanner) ScanTree(root string, skip func(rel string) bool) ([]Leak, int, error) {
	var leaks []Leak
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel != "." && skip(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("leak scan: %w", err)
		}
		files++
		leaks = append(leaks, s.Scan(rel, b)...)
		return nil
	})
	return leaks, files, err
}
