package status

import (
	"flag"
	"fmt"
	"strings"
)

// BindFlags registers the page's link flags on fs, bound to i's fields.
// The caller fills in the rest of Info.
func (i *Info) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&i.CommitURLTemplate, "commit-url-template", "", "link revisions on the status page, e.g. https://github.com/org/repo/commit/{revision}")
	fs.StringVar(&i.TraceURLTemplate, "trace-url-template", "", "link ticks to their traces on the status page, e.g. http://jaeger:16686/trace/{trace_id}")
}

// Validate checks the fields BindFlags binds.
func (i *Info) Validate() error {
	switch {
	case i.CommitURLTemplate != "" && !URLTemplate(i.CommitURLTemplate, "{revision}"):
		return fmt.Errorf("--commit-url-template must be an http(s) URL with {revision} in it, not %q", i.CommitURLTemplate)
	case i.TraceURLTemplate != "" && !URLTemplate(i.TraceURLTemplate, "{trace_id}"):
		return fmt.Errorf("--trace-url-template must be an http(s) URL with {trace_id} in it, not %q", i.TraceURLTemplate)
	}
	return nil
}

// URLTemplate reports whether t is an http(s) URL that names placeholder.
func URLTemplate(t, placeholder string) bool {
	return (strings.HasPrefix(t, "https://") || strings.HasPrefix(t, "http://")) && strings.Contains(t, placeholder)
}
