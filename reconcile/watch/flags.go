package watch

import (
	"errors"
	"flag"
)

// BindFlags registers the caches' flags on fs, bound to o's fields, with
// their defaults. The caller fills in the rest (Log, OnEvent).
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.DurationVar(&o.CheckEvery, "watch-check-every", DefaultCheckEvery, "with --observe=watch: how often each cache is compared with one LIST of its kind (names and resourceVersions), plus up to a fifth at random; a cache found behind (a watch that loses events but still sends bookmarks) is restarted with a fresh list and the changes it missed are healed, so such a watch hides drift for this long at most; a kind listed in full meanwhile is not checked")
	fs.DurationVar(&o.StaleAfter, "watch-stale-after", DefaultStaleAfter, "with --observe=watch: a cache that has seen no event and no bookmark for this long is restarted (a fresh LIST and a new watch) by the tick that reads it, so that a stalled watch cannot hide drift; the API server bookmarks a kind only when resourceVersions move, so a kind quiet across the cluster costs one LIST per this long (per tick when --interval is longer)")
}

// Validate checks the fields BindFlags binds.
func (o *Options) Validate() error {
	if o.StaleAfter <= 0 {
		return errors.New("--watch-stale-after must be positive")
	}
	if o.CheckEvery <= 0 {
		return errors.New("--watch-check-every must be positive")
	}
	return nil
}
