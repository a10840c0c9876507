package manifest

import (
	"flag"
	"fmt"
)

// Limits bound the work a commit can make rendering do. Each is a safety
// net against a hostile or broken repository; exceeding one fails the
// render with a *LimitError that names the limit and its flag.
type Limits struct {
	// MaxBytes caps the bytes read from the commit's tree and the bytes of
	// the rendered output, each (--render-max-bytes).
	MaxBytes int64
	// MaxObjects caps the number of objects rendered (--render-max-objects).
	MaxObjects int
	// MaxFileBytes caps the size of one file read (--render-max-file-bytes).
	MaxFileBytes int64
	// MaxDepth caps the nesting depth of one object (--render-max-depth).
	MaxDepth int
	// MaxAliasExpansion caps YAML alias expansion: a document may expand to
	// at most this many times its own nodes (plus a small allowance)
	// (--render-max-alias-expansion).
	MaxAliasExpansion int
	// MaxFiles caps the entries (files, directories and links) of an OCI
	// artifact's layer (--render-max-files).
	MaxFiles int
}

// DefaultLimits are the limits used for zero fields of Limits.
var DefaultLimits = Limits{
	MaxBytes:          64 << 20,
	MaxObjects:        20000,
	MaxFileBytes:      32 << 20,
	MaxDepth:          100,
	MaxAliasExpansion: 10,
	MaxFiles:          20000,
}

// WithDefaults returns l with every zero field set from DefaultLimits.
func (l Limits) WithDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultLimits.MaxBytes
	}
	if l.MaxObjects <= 0 {
		l.MaxObjects = DefaultLimits.MaxObjects
	}
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = DefaultLimits.MaxFileBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultLimits.MaxDepth
	}
	if l.MaxAliasExpansion <= 0 {
		l.MaxAliasExpansion = DefaultLimits.MaxAliasExpansion
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultLimits.MaxFiles
	}
	return l
}

// BindFlags registers the --render-max-* flags on fs, bound to l, with the
// defaults of DefaultLimits.
func (l *Limits) BindFlags(fs *flag.FlagSet) {
	fs.Int64Var(&l.MaxBytes, "render-max-bytes", DefaultLimits.MaxBytes, "most bytes a render may read from the commit, and most bytes it may produce")
	fs.IntVar(&l.MaxObjects, "render-max-objects", DefaultLimits.MaxObjects, "most objects a render may produce")
	fs.Int64Var(&l.MaxFileBytes, "render-max-file-bytes", DefaultLimits.MaxFileBytes, "largest file a render may read")
	fs.IntVar(&l.MaxDepth, "render-max-depth", DefaultLimits.MaxDepth, "deepest nesting of maps and lists in one object")
	fs.IntVar(&l.MaxAliasExpansion, "render-max-alias-expansion", DefaultLimits.MaxAliasExpansion, "most a YAML document may grow by expanding its aliases, as a multiple of its own size")
	fs.IntVar(&l.MaxFiles, "render-max-files", DefaultLimits.MaxFiles, "most files, directories and links an OCI artifact's layer may hold")
}

// Validate checks that every limit is positive (a flag of 0 would not mean
// the default).
func (l Limits) Validate() error {
	if l.MaxBytes <= 0 || l.MaxObjects <= 0 || l.MaxFileBytes <= 0 || l.MaxDepth <= 0 || l.MaxAliasExpansion <= 0 || l.MaxFiles <= 0 {
		return fmt.Errorf("the --render-max-* limits must be positive")
	}
	return nil
}

// Names of the limits, as LimitError.Limit reports them.
const (
	LimitBytes          = "bytes"
	LimitObjects        = "objects"
	LimitFileBytes      = "file size"
	LimitDepth          = "nesting depth"
	LimitAliasExpansion = "alias expansion"
	LimitMemory         = "memory"
	LimitFiles          = "files"
)

// limitFlags maps each limit to the flag that sets it.
var limitFlags = map[string]string{
	LimitBytes:          "--render-max-bytes",
	LimitObjects:        "--render-max-objects",
	LimitFileBytes:      "--render-max-file-bytes",
	LimitDepth:          "--render-max-depth",
	LimitAliasExpansion: "--render-max-alias-expansion",
	LimitMemory:         "--render-max-memory",
	LimitFiles:          "--render-max-files",
}

// LimitFlag is the command-line flag that sets limit (one of the Limit*
// names), or "".
func LimitFlag(limit string) string { return limitFlags[limit] }

// LimitError reports a render that exceeded one of its Limits. Render
// returns it inside a *ManifestError.
type LimitError struct {
	// Limit is one of the Limit* names.
	Limit string
	// Flag is the command-line flag that sets the limit.
	Flag string
	// Value is what the render reached (at least Max+1; for bytes, possibly
	// only the point at which it stopped counting).
	Value int64
	// Max is the limit in force.
	Max int64
	// File is the file being read when the limit was exceeded, or "".
	File string
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s limit exceeded: %d > %d (raise %s if this is intended)", e.Limit, e.Value, e.Max, e.Flag)
}

// NewLimitError is the error of a render of file that reached value of
// limit (one of the Limit* names), whose maximum is max: a *LimitError
// inside a *ManifestError of file.
func NewLimitError(limit string, value, max int64, file string) *ManifestError {
	return &ManifestError{File: file, Err: &LimitError{Limit: limit, Flag: limitFlags[limit], Value: value, Max: max, File: file}}
}
