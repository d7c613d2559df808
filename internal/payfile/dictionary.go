package payfile

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"
)

// ColBankName is the column checked against Options.BankNames.
const ColBankName = "bankName"

// Dictionary is a list of the names the PSP accepts for a property
// (telecom operators, bank names), as its dictionary gives them. A value
// matches only exactly, once trimmed of spaces: "Mts" is not "MTS".
type Dictionary struct {
	source string // where the names come from, for messages (a file's base name)
	names  map[string]struct{}
	sorted []string
	folded map[string][]string // lower case -> the names that fold to it
}

// NewDictionary builds a dictionary from names, trimmed of spaces; blank
// names are ignored. source names the list in messages.
func NewDictionary(source string, names []string) (*Dictionary, error) {
	d := &Dictionary{source: source, names: make(map[string]struct{}), folded: make(map[string][]string)}
	for i, n := range names {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if msg := textProblem(n, false); msg != "" {
			return nil, fmt.Errorf("%w: %s: name %d %q %s", ErrBadOptions, source, i+1, n, msg)
		}
		if _, dup := d.names[n]; dup {
			continue
		}
		d.names[n] = struct{}{}
		d.sorted = append(d.sorted, n)
		f := strings.ToLower(n)
		d.folded[f] = append(d.folded[f], n)
	}
	if len(d.names) == 0 {
		return nil, fmt.Errorf("%w: %s: no names", ErrBadOptions, source)
	}
	slices.Sort(d.sorted)
	return d, nil
}

// ReadDictionary reads a dictionary file: UTF-8 text, one name a line.
func ReadDictionary(path string) (*Dictionary, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 4<<20+1))
	if err != nil {
		return nil, err
	}
	name := filepath.Base(path)
	if len(data) > 4<<20 {
		return nil, fmt.Errorf("%w: %s: larger than 4 MiB: is it a dictionary?", ErrBadOptions, name)
	}
	data = bytes.TrimPrefix(data, utf8BOM)
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("%w: %s: not UTF-8 text", ErrBadOptions, name)
	}
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, len(data)+1)
	for sc.Scan() {
		names = append(names, strings.TrimRight(sc.Text(), "\r"))
	}
	return NewDictionary(name, names)
}

// Len is the number of names.
func (d *Dictionary) Len() int { return len(d.sorted) }

// Has reports whether v is one of the names.
func (d *Dictionary) Has(v string) bool {
	_, ok := d.names[v]
	return ok
}

// check returns "" if v is in the dictionary, or d is nil; else why not
// and what was probably meant.
func (d *Dictionary) check(v string) string {
	if d == nil || d.Has(v) {
		return ""
	}
	msg := fmt.Sprintf("%q is not in the dictionary %s (%d names)", v, d.source, len(d.sorted))
	if s := d.suggest(v); len(s) > 0 {
		return msg + ": did you mean " + quoteList(s) + "? Names must match exactly, case included"
	}
	return msg + ": use a name exactly as the PSP's dictionary gives it"
}

// suggest returns the names v probably means: the same but for case, else
// those within a small edit distance ignoring case, else those that v
// starts with or that start with v ("MTS-Russia", "MTS").
func (d *Dictionary) suggest(v string) []string {
	f := strings.ToLower(v)
	if same := d.folded[f]; len(same) > 0 {
		return same
	}
	var near []string
	best := max(1, utf8.RuneCountInString(f)/4)
	for _, n := range d.sorted {
		dist := editDistance(f, strings.ToLower(n), best)
		switch {
		case dist < best:
			best, near = dist, []string{n}
		case dist == best:
			near = append(near, n)
		}
	}
	if len(near) > 0 {
		return near[:min(len(near), 3)]
	}
	for _, n := range d.sorted {
		ln := strings.ToLower(n)
		if utf8.RuneCountInString(ln) >= 2 && (strings.HasPrefix(f, ln) || strings.HasPrefix(ln, f) && utf8.RuneCountInString(f) >= 2) {
			near = append(near, n)
		}
	}
	return near[:min(len(near), 3)]
}

// editDistance is the Levenshtein distance of a and b in runes, or a value
// above limit once it is known to exceed limit.
func editDistance(a, b string, limit int) int {
	ra, rb := []rune(a), []rune(b)
	if d := len(ra) - len(rb); d > limit || -d > limit {
		return limit + 1
	}
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin > limit {
			return limit + 1
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}
