package fetch

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"
)

// CleanPath turns the configured path (Config.Path) into a clean
// slash-separated path relative to the revision's root, "." for the root
// itself. A leading "/" is allowed (it means the root); climbing out with
// ".." is not.
func CleanPath(p string) (string, error) {
	p = path.Clean(strings.TrimLeft(filepath.ToSlash(p), "/"))
	if p == ".." || strings.HasPrefix(p, "../") {
		return "", fmt.Errorf("source: path %q leaves the repository", p)
	}
	return p, nil
}
