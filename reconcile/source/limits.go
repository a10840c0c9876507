package source

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

// withDefaults returns l with every zero field set from DefaultLimits.
func (l Limits) withDefaults() Limits {
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
