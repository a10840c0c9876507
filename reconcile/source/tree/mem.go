package tree

import (
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

// Mem is a directory held in memory (an unpacked archive's): a Dir whose
// entries are added with Add. The zero value is not ready: use NewMem.
type Mem struct {
	entries map[string]*MemEntry
	names   []string // sorted
}

// MemEntry is one entry of a Mem: a file's content or a link's target
// (Data), or a directory (Dir).
type MemEntry struct {
	Kind EntryKind
	Data []byte
	Dir  *Mem
}

// NewMem returns an empty directory.
func NewMem() *Mem { return &Mem{entries: map[string]*MemEntry{}} }

// MemFiles returns a directory of files held by path, '/'-separated, each
// path's directories made on the way.
func MemFiles(files map[string]string) *Mem {
	root := NewMem()
	for p, content := range files {
		d := root
		parts := strings.Split(p, "/")
		for _, part := range parts[:len(parts)-1] {
			e, ok := d.Lookup(part)
			if !ok {
				e = &MemEntry{Kind: KindDir, Dir: NewMem()}
				d.Add(part, e)
			}
			d = e.Dir
		}
		d.Add(parts[len(parts)-1], &MemEntry{Kind: KindFile, Data: []byte(content)})
	}
	return root
}

// Lookup returns the entry called name, if there is one.
func (d *Mem) Lookup(name string) (*MemEntry, bool) {
	e, ok := d.entries[name]
	return e, ok
}

// Add puts e in d under name, in its sorted place, in place of an entry
// of that name.
func (d *Mem) Add(name string, e *MemEntry) {
	if _, ok := d.entries[name]; !ok {
		i := sort.SearchStrings(d.names, name)
		d.names = append(d.names, "")
		copy(d.names[i+1:], d.names[i:])
		d.names[i] = name
	}
	d.entries[name] = e
}

// Entries implements Dir.
func (d *Mem) Entries() []Entry {
	out := make([]Entry, len(d.names))
	for i, n := range d.names {
		out[i] = Entry{Name: n, Kind: d.entries[n].Kind}
	}
	return out
}

// Entry implements Dir.
func (d *Mem) Entry(name string) (Entry, error) {
	n, ok := d.entries[name]
	if !ok {
		return Entry{}, fmt.Errorf("%s: %w", name, fs.ErrNotExist)
	}
	return Entry{Name: name, Kind: n.Kind}, nil
}

// Dir implements Dir.
func (d *Mem) Dir(name string) (Dir, error) {
	n, ok := d.entries[name]
	if !ok || n.Kind != KindDir {
		return nil, fmt.Errorf("%s: %w", name, fs.ErrNotExist)
	}
	return n.Dir, nil
}

// File implements Dir.
func (d *Mem) File(name string) (File, error) {
	n, ok := d.entries[name]
	if !ok || n.Kind == KindDir {
		return nil, fmt.Errorf("%s: %w", name, fs.ErrNotExist)
	}
	return Bytes(n.Data), nil
}
