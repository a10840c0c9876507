package git

import (
	"fmt"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// LargeObject is the size above which an object of the repository Render
// reads is streamed from disk when read, instead of being inflated whole
// into memory as soon as it is looked up. go-git's default loads every
// blob it is asked for, before anyone can look at its size: a tree of many
// large files then cost their whole size in memory even when the render
// limits refuse the first of them.
const LargeObject = 256 << 10

// objectCacheBytes bounds go-git's object cache for one render (go-git's
// default is 96 MiB). Only objects up to LargeObject are cached.
const objectCacheBytes = 16 << 20

// streamLarge returns repo reopened on the same .git directory with
// objects above LargeObject read lazily: looking one up reads its header
// (type and size) only. It is meant for reading, not fetching.
func streamLarge(repo *git.Repository) (*git.Repository, error) {
	fs, ok := repo.Storer.(*filesystem.Storage)
	if !ok {
		return repo, nil
	}
	st := filesystem.NewStorageWithOptions(fs.Filesystem(), cache.NewObjectLRU(objectCacheBytes),
		filesystem.Options{LargeObjectThreshold: LargeObject})
	r, err := git.Open(st, nil)
	if err != nil {
		return nil, fmt.Errorf("open objects: %w", err)
	}
	return r, nil
}
