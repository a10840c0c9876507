package watch

import (
	"errors"
	"flag"
)

// BindFlags registers the caches' flags on fs, bound to o's fields, with
// their defaults. The caller fills in the rest (Log, OnEvent).
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.DurationVar(&o.StaleAfter, "watch-stale-after", DefaultStaleAfter, "with --observe=watch: a cache that has seen no event and no bookmark for this long is restarted (a fresh LIST and a new watch) by the tick that reads it, so that a stalled watch cannot hide drift; the API server bookmarks a kind only when resourceVersions move, so a kind quiet across the cluster costs one LIST per this long (per tick when --interval is longer)")
}

// Validate checks the fields BindFlags binds.
func (o *Options) Validate() error {
	if o.StaleAfter <= 0 {
		return errors.New("--watch-stale-after must be positive")
	}
	return nil
}
